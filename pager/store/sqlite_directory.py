"""The SQLite backend of the directory port (`pager/store/ports.py` `Directory`): the identity
rules of SPEC §7 (`_registration.py`) and the operator's actions, each decided and committed in
one transaction of the writer, from the store itself (who is attached, who holds an alias)."""

from __future__ import annotations

from pager.domain.api import Caller
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.names import alias_key, format_address
from pager.domain.records import Session
from pager.domain.registration import Outcome, Registration, Takeover
from pager.domain.results import AliasResult, SessionRef, TakenOver
from pager.domain.retention import Action, Applied
from pager.domain.workspace import Workspace
from pager.store import messaging as ms
from pager.store._conn import Conn
from pager.store._registration import (
    RegisterPlan,
    claim_alias,
    holder_details,
    identity_of,
    take_over_by_alias,
)
from pager.store.sqlite_ports import Writer


class SqliteDirectory:
    def __init__(self, writer: Writer) -> None:
        self._writer = writer

    async def register(
        self,
        registration: Registration,
        *,
        now: float,
        lease_ttl: float,
        token: str,
        resume_token: str,
    ) -> Outcome:
        plan = RegisterPlan(registration, now, lease_ttl, token, resume_token)
        return await self._writer.write(plan.apply)

    async def rename(
        self,
        caller: Caller,
        alias: str,
        *,
        force: bool,
        claim: bool,
        mine: Session | None,
        lease: float,
        now: float,
        lease_ttl: float,
    ) -> tuple[AliasResult, Takeover | None]:
        agent_id = caller.agent_id
        takes_over = force or claim

        def op(conn: Conn) -> tuple[AliasResult, Takeover | None]:
            me = identity_of(conn, agent_id)
            holder = ms.identity_by_alias(conn, me.workspace_key, alias_key(alias))
            if claim and holder is None:
                raise PagerError(
                    ErrorCode.UNKNOWN_RECIPIENT,
                    f"no identity is named {alias!r} in this workspace; `pager who` lists them",
                )
            held = None if holder is None else ms.attached_session(conn, holder.id)
            if claim and not force and holder is not None and held is not None:
                raise PagerError(
                    ErrorCode.ALIAS_CONFLICT,
                    f"{alias!r} is attached to a session; claim it with --force to end that"
                    " session and take it over",
                    **holder_details(conn, holder),
                )
            if takes_over and holder is not None and holder.id != me.id:
                if mine is None:  # it ended while this request waited
                    raise PagerError(
                        ErrorCode.ENDED, "this session ended before the takeover; nothing changed"
                    )
                done = take_over_by_alias(
                    conn,
                    holder,
                    held,
                    mine,
                    alias,
                    lease_expires_at=lease,
                    now=now,
                    lease_ttl=lease_ttl,
                )
                taken = done.identity
                slug = ms.workspace_slug(conn, taken.workspace_key)
                result = AliasResult(
                    agent_id=taken.id,
                    alias=taken.alias,
                    address=format_address(taken.alias, slug),
                    taken_over=TakenOver(
                        previous_agent_id=me.id,
                        ended_session_id=None if done.ended is None else done.ended.id,
                    ),
                    session=SessionRef(id=done.session.id, epoch=done.session.epoch),
                )
                return result, done
            claim_alias(conn, me.workspace_key, alias, me.id, force=force)
            ms.set_alias(
                conn, me.id, me.workspace_key, alias, alias_key(alias), durable=True, now=now
            )
            slug = ms.workspace_slug(conn, me.workspace_key)
            renamed = AliasResult(agent_id=me.id, alias=alias, address=format_address(alias, slug))
            return renamed, None

        return await self._writer.write(op)

    async def move(self, caller: Caller, workspace: Workspace, *, now: float) -> AliasResult:
        agent_id = caller.agent_id

        def op(conn: Conn) -> AliasResult:
            me = identity_of(conn, agent_id)
            ms.ensure_workspace(conn, workspace, now)
            if me.workspace_key != workspace.key:
                claim_alias(conn, workspace.key, me.alias, me.id, force=False)
                ms.set_alias(
                    conn,
                    me.id,
                    workspace.key,
                    me.alias,
                    alias_key(me.alias),
                    durable=me.durable,
                    now=now,
                )
            return AliasResult(
                agent_id=me.id,
                alias=me.alias,
                workspace=workspace.path,
                # The stored slug: a workspace copied from another store keeps its own.
                address=format_address(me.alias, ms.workspace_slug(conn, workspace.key)),
            )

        return await self._writer.write(op)

    async def retire(self, agent_id: str, action: Action, reason: str, *, now: float) -> Applied:
        def op(conn: Conn) -> Applied:
            identity = ms.get_identity(conn, agent_id)
            if identity is None:
                raise PagerError(
                    ErrorCode.NOT_FOUND,
                    f"no identity {agent_id!r} to {action.value}",
                    agent_id=agent_id,
                )
            if action is Action.ARCHIVE:
                done = ms.archive_identity(conn, agent_id, now=now, at=now, reason=reason)
            elif action is Action.UNARCHIVE:
                done = ms.unarchive_identity(conn, agent_id, now=now, reason=reason)
            elif action is Action.PURGE:
                done = ms.purge_identity(conn, agent_id, now=now, reason=reason)
            else:
                done = ms.reap_identity(conn, agent_id, now=now, reason=reason)
            if done is None:
                state = "already archived" if action is Action.ARCHIVE else "not archived"
                raise PagerError(
                    ErrorCode.CONFLICT,
                    f"{identity.alias} ({agent_id}) is {state}; nothing to {action.value}",
                    agent_id=agent_id,
                    archived=identity.archived_at is not None,
                )
            return done

        return await self._writer.write(op, heavy=True)
