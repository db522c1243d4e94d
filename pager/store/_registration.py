"""The identity rules of SPEC §7 applied inside one transaction: this module reads the rows
a decision of `pager.domain.identity_rules` needs, asks it, and writes what it decided
(create, rejoin by name, conversation key or resume token, refuse, or take over).

A forced takeover has one implementation, `take_over`, for both edges that offer `force`
(a registration and `update_agent_alias`). The SQLite directory port (sql_ports.py) runs
these in the writer's transaction; nothing here awaits.
"""

from __future__ import annotations

from typing import Any, Literal, NoReturn

import attrs

from pager.domain import identity_rules as rules
from pager.domain import ids
from pager.domain.addressing import PERSON
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.names import alias_key, format_address, generate_handle
from pager.domain.read_ahead import MadeBySend
from pager.domain.records import Identity, Session, SessionState
from pager.domain.registration import (
    Outcome,
    Registered,
    Registration,
    Takeover,
    WakeStart,
)
from pager.domain.wake import HOUR, WakeRun
from pager.domain.workspace import Workspace
from pager.store import _wake as wk
from pager.store import messaging as ms
from pager.store._conn import Conn
from pager.store._sql import sql


def identity_of(conn: Conn, agent_id: str) -> Identity:
    identity = ms.get_identity(conn, agent_id)
    if identity is None:
        raise PagerError(ErrorCode.ENDED, "this identity no longer exists; register again")
    return identity


def holder_details(conn: Conn, identity: Identity) -> dict[str, Any]:
    slug = ms.workspace_slug(conn, identity.workspace_key)
    return {
        "holder": {
            "agent_id": identity.id,
            "alias": identity.alias,
            "address": format_address(identity.alias, slug),
            "implementation": identity.implementation,
        }
    }


def found(conn: Conn, identity: Identity) -> rules.Found:
    """`identity` with its attached session and whether that session is a wake run's."""
    attached = ms.attached_session(conn, identity.id)
    wake_run = attached is not None and wk.open_run_of_session(conn, attached.id) is not None
    return rules.Found(identity, attached, wake_run)


def refuse(conn: Conn, refused: rules.Refuse) -> NoReturn:
    """Raise the refusal, with the details of the identity it is about."""
    about = refused.about
    raise refused.error(None if about is None else holder_details(conn, about))


def claim_alias(
    conn: Conn,
    workspace_key: str,
    alias: str,
    agent_id: str,
    *,
    force: bool,
) -> None:
    """Make `alias` free for `agent_id` in the workspace, or raise alias_conflict
    (`identity_rules.decide_alias_claim`)."""
    key = alias_key(alias)
    holder = ms.identity_by_alias(conn, workspace_key, key)
    reserved = ms.alias_reserved_by(conn, workspace_key, key)
    reserver = None
    if reserved is not None and reserved != agent_id:
        reserver = ms.get_identity(conn, reserved)
    decided = rules.decide_alias_claim(
        alias,
        agent_id,
        holder=None if holder is None else found(conn, holder),
        reserved_by=reserved,
        reserver=reserver,
        force=force,
    )
    if isinstance(decided, rules.Refuse):
        refuse(conn, decided)
    if decided.reassign:
        conn.execute(
            sql(
                "UPDATE alias_reservations SET identity_id = {} WHERE workspace_key = {}"
                " AND alias_key = {}"
            ),
            (agent_id, workspace_key, key),
        )


def take_over(
    conn: Conn,
    target: rules.Found,
    session: Session,
    *,
    via: Literal["register", "update_agent_alias"],
    now: float,
    lease_ttl: float,
    previous: Session | None = None,
) -> Takeover:
    """SPEC §7's one rule for `force`, whichever edge asked: `session` (the caller's) is bound
    to `identity`, which keeps its id, inbox, history and alias; the holder's attached
    session ends and its token runs on as a fresh unnamed agent. `previous` is the caller's
    own session on the identity it leaves (the alias tool): that identity stays as it was,
    detached, and the caller's token, resume token and conversation move with it.
    Records `agent.taken_over` with both sessions."""
    identity, holder = target.identity, target.attached
    handed: Session | None = None
    if holder is not None:
        ending = rules.TAKEN_OVER
        ms.end_session(conn, holder.id, SessionState.ENDED, ending, now, cause="taken_over")
        if rules.hands_on(target):
            handed = _hand_to_fresh_identity(conn, identity, holder, now, lease_ttl)
    if previous is not None:
        reason = f"took over {identity.alias} ({identity.id})"
        ms.end_session(conn, previous.id, SessionState.DETACHED, reason, now, cause="took_over")
        ms.touch_identity(conn, previous.identity_id, now, attached=False)
        ms.retire_credentials(conn, previous.id)  # `session` carries them from now on
        if previous.conversation_key is not None:
            # The caller's hooks and its next resume must find the identity it now holds.
            ms.move_conversation(conn, previous.conversation_key, previous.identity_id, identity.id)
    taken = attach_session(conn, identity, session, now)
    ms.record_agent_event(
        conn,
        now,
        "agent.taken_over",
        identity.id,
        via=via,
        session_id=session.id,
        epoch=session.epoch,
        ended_session_id=None if holder is None else holder.id,
        holder_agent_id=None if handed is None else handed.identity_id,
        previous_agent_id=None if previous is None else previous.identity_id,
        previous_session_id=None if previous is None else previous.id,
    )
    return Takeover(taken, session, holder, handed, identity.implementation)


def take_over_by_alias(
    conn: Conn,
    target: rules.Found,
    mine: Session,
    alias: str,
    *,
    lease_expires_at: float,
    now: float,
    lease_ttl: float,
) -> Takeover:
    """`update_agent_alias(alias, force=true)`: the caller's session `mine` takes over
    `target` (which holds the alias) as a new attachment of it, with the caller's token,
    and gives it the alias as spelled (a rename makes it durable, SPEC §7)."""
    identity = target.identity
    latest = ms.latest_session(conn, identity.id)
    session = attrs.evolve(
        mine,
        id=ids.new_session_id(),
        identity_id=identity.id,
        epoch=(latest.epoch + 1) if latest is not None else 1,
        state=SessionState.ATTACHED,
        created_at=now,
        lease_expires_at=lease_expires_at,
        end_reason=None,
    )
    done = take_over(
        conn,
        target,
        session,
        via="update_agent_alias",
        now=now,
        lease_ttl=lease_ttl,
        previous=mine,
    )
    ws = identity.workspace_key
    ms.set_alias(conn, identity.id, ws, alias, alias_key(alias), durable=True, now=now)
    renamed = ms.get_identity(conn, identity.id)
    assert renamed is not None
    return attrs.evolve(done, identity=renamed)


def attach_session(conn: Conn, identity: Identity, session: Session, now: float) -> Identity:
    """Insert an attached session of `identity`; attaching again un-archives it (SPEC §9)."""
    ms.insert_session(conn, session)
    if identity.archived_at is not None:
        ms.record_agent_event(conn, now, "agent.unarchived", identity.id, reason="attached")
    ms.touch_identity(conn, identity.id, now, attached=True)
    attached = ms.get_identity(conn, identity.id)
    assert attached is not None
    return attached


def _hand_to_fresh_identity(
    conn: Conn, identity: Identity, holder: Session, now: float, lease_ttl: float
) -> Session:
    """The holder's token (and resume token, and conversation) now run as a fresh unnamed
    agent in the same workspace, so its next call, resume or hook never reaches the
    identity it lost (SPEC §7)."""
    ws = identity.workspace_key
    handle = generate_handle(lambda h: ms.alias_reserved_by(conn, ws, h) is not None)
    fresh = Identity(
        id=ids.new_agent_id(),
        workspace_key=ws,
        alias=handle,
        durable=False,
        implementation=identity.implementation,
        created_at=now,
        last_seen=now,
    )
    ms.insert_identity(conn, fresh, handle)
    ms.retire_credentials(conn, holder.id)
    if holder.conversation_key is not None:
        ms.move_conversation(conn, holder.conversation_key, identity.id, fresh.id)
    session = attrs.evolve(
        holder,
        id=ids.new_session_id(),
        identity_id=fresh.id,
        epoch=1,
        state=SessionState.ATTACHED,
        created_at=now,
        lease_expires_at=now + lease_ttl,
        end_reason=None,
    )
    ms.insert_session(conn, session)
    return session


@attrs.frozen
class RegisterPlan:
    """One registration: reads what `identity_rules.decide_registration` needs, inside the
    commit, and applies its decision."""

    command: Registration
    now: float
    lease_ttl: float
    token: str
    resume_token: str

    def apply(self, conn: Conn) -> Outcome:
        command, ws = self.command, self.command.workspace
        if command.wake is not None:
            return self._wake_run(conn, command.wake)
        ms.ensure_workspace(conn, ws, self.now)
        decided = rules.decide_registration(command, self._facts(conn))
        if isinstance(decided, rules.Refuse):
            refuse(conn, decided)
        ended: list[Session] = []
        started: list[tuple[Session, str]] = []
        if isinstance(decided, rules.TakeOver):
            session = self._new_session(conn, decided.found.identity)
            done = take_over(
                conn,
                decided.found,
                session,
                via="register",
                now=self.now,
                lease_ttl=self.lease_ttl,
            )
            identity = done.identity
            if done.ended is not None:
                ended.append(done.ended)
            if done.handed is not None:
                started.append((done.handed, done.handed_implementation))
        else:
            if isinstance(decided, rules.Create):
                target = self._create(conn, decided)
                previous = None
            else:
                target, previous = decided.found.identity, rules.ending(decided.found)
            session = self._new_session(conn, target)
            if previous is not None:
                ms.end_session(
                    conn,
                    previous.session.id,
                    SessionState.ENDED,
                    previous.reason,
                    self.now,
                    cause=previous.cause,
                )
                ended.append(previous.session)
            identity = attach_session(conn, target, session, self.now)
        if command.conversation_key is not None:
            ms.bind_conversation(
                conn, command.implementation, command.conversation_key, identity.id
            )
        started.append((session, identity.implementation))
        return Outcome(self._registered(conn, identity, session), ended, started)

    def _facts(self, conn: Conn) -> rules.RegistrationFacts:
        """The rows the decision reads, each only when the request names it."""
        command = self.command
        resumed = conversation = None
        name = rules.Name()
        if command.resume_token is not None:
            session = ms.session_by_resume(conn, ids.hash_token(command.resume_token))
            resumed = None if session is None else self._found(conn, session.identity_id)
        if command.conversation_key is not None:
            bound = ms.identity_of_conversation(
                conn, command.implementation, command.conversation_key
            )
            conversation = None if bound is None else self._found(conn, bound)
        if command.session_name is not None:
            key = alias_key(command.session_name)
            holder = ms.identity_by_alias(conn, command.workspace.key, key)
            if holder is not None:
                name = rules.Name(holder=found(conn, holder))
            else:
                reserved = ms.alias_reserved_by(conn, command.workspace.key, key)
                reserver = None if reserved is None else ms.get_identity(conn, reserved)
                name = rules.Name(reserved_by=reserved, reserver=reserver)
        return rules.RegistrationFacts(resumed, conversation, name)

    @staticmethod
    def _found(conn: Conn, identity_id: str) -> rules.Found | None:
        identity = ms.get_identity(conn, identity_id)
        return None if identity is None else found(conn, identity)

    def _registered(self, conn: Conn, identity: Identity, session: Session) -> Registered:
        slug = ms.workspace_slug(conn, identity.workspace_key)
        return Registered(identity, slug, session, self.token, self.resume_token)

    def _new_session(self, conn: Conn, target: Identity) -> Session:
        """The registration's session of `target`: the identity's next epoch, attached."""
        command = self.command
        latest = ms.latest_session(conn, target.id)
        return Session(
            id=ids.new_session_id(),
            identity_id=target.id,
            epoch=(latest.epoch + 1) if latest is not None else 1,
            token_hash=ids.hash_token(self.token),
            resume_hash=ids.hash_token(self.resume_token),
            state=SessionState.ATTACHED,
            created_at=self.now,
            lease_expires_at=self.now + self.lease_ttl,
            conversation_key=command.conversation_key,
            delivery=command.delivery,
            host=command.workspace.host,
        )

    def _wake_run(self, conn: Conn, wake: WakeStart) -> Outcome:
        """Attach a wake run's session to its identity, or refuse
        (`identity_rules.decide_wake_run`)."""
        target = ms.get_identity(conn, wake.agent_id)
        attached = target is not None and ms.attached_session(conn, target.id) is not None
        starts = [] if target is None else wk.run_starts_since(conn, target.id, self.now - HOUR)
        refused = rules.decide_wake_run(
            wake, target, attached=attached, starts=starts, now=self.now
        )
        if refused is not None:
            refuse(conn, refused)
        assert target is not None  # decide_wake_run refuses an identity that is gone
        session = self._new_session(conn, target)
        identity = attach_session(conn, target, session, self.now)
        wk.insert_wake_run(
            conn, WakeRun(wake.run_id, target.id, session.id, session.host, self.now)
        )
        registered = self._registered(conn, identity, session)
        return Outcome(registered, [], [(session, identity.implementation)])

    def _create(self, conn: Conn, create: rules.Create) -> Identity:
        ws = self.command.workspace
        alias = create.alias or generate_handle(
            lambda h: ms.alias_reserved_by(conn, ws.key, h) is not None
        )
        identity = Identity(
            id=ids.new_agent_id(),
            workspace_key=ws.key,
            alias=alias,
            durable=create.durable,
            implementation=self.command.implementation,
            created_at=self.now,
            last_seen=self.now,
        )
        ms.insert_identity(conn, identity, alias_key(alias))
        return identity


def person_identity(conn: Conn, workspace: Workspace, alias: str, now: float) -> Identity:
    """The person's durable identity in `workspace` (SPEC §4.2), created on first use with
    `alias` (later `pager alias` may rename it: it stays the person's); its use counts as
    activity (last seen) and shows it again if it was archived
    (`identity_rules.decide_person`)."""
    ms.ensure_workspace(conn, workspace, now)
    key = alias_key(alias)
    person = ms.identity_of_implementation(conn, workspace.key, PERSON)
    by_alias = None if person is not None else ms.identity_by_alias(conn, workspace.key, key)
    reserved = None
    if person is None and by_alias is None:
        reserved = ms.alias_reserved_by(conn, workspace.key, key)
    decided = rules.decide_person(alias, person=person, by_alias=by_alias, reserved_by=reserved)
    if isinstance(decided, rules.Refuse):
        refuse(conn, decided)
    if isinstance(decided, rules.CreatePerson):
        holder = decided.identity(workspace.key, now)
        ms.insert_identity(conn, holder, key)
        return holder
    holder = decided.identity
    if holder.archived_at is not None:
        ms.unarchive_identity(conn, holder.id, now=now, reason="used by the person")
    ms.touch_identity(conn, holder.id, now)
    found = ms.get_identity(conn, holder.id)
    assert found is not None
    return found


def make_person_in_send(conn: Conn, made: MadeBySend) -> None:
    """The person's identity as the first send to them in a workspace makes it, in the
    send's write and reading nothing before its commit (pager/store/sql_ports.py): inserted
    with its alias reserved unless another write made the person's identity there first (the
    same alias, through any broker: the insert waits for that write's commit), which fails
    this write (`StaleFacts`, by `pager_expect`) so the send is made again to that identity.
    PostgreSQL's statements (`pager_expect`)."""
    person = made.identity
    ms.insert_identity(conn, person, made.alias_key, slug=made.slug, if_absent=True)
    conn.execute(
        sql(
            "SELECT pager_expect((SELECT id FROM identities WHERE workspace_key = {ws}"
            " AND implementation = {person_implementation} ORDER BY created_at, id LIMIT 1) = {id}"
            " AND (SELECT identity_id FROM alias_reservations WHERE workspace_key = {ws}"
            " AND alias_key = {key}) = {id})"
        ),
        {"ws": person.workspace_key, "person_implementation": PERSON, "id": person.id,
         "key": made.alias_key},
    )  # fmt: skip
