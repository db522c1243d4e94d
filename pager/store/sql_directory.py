"""The directory port (`pager/store/ports.py` `Directory`) over either engine's writer: the identity
rules of SPEC §7 (decided by `pager.domain.identity_rules`, applied by `_registration.py`) and
the operator's actions, each read and committed in one transaction of the writer."""

from __future__ import annotations

from pager.domain import identity_rules as rules
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
    found,
    identity_of,
    refuse,
    take_over_by_alias,
)
from pager.store.sql_ports import Writer


class SqlDirectory:
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

        def op(conn: Conn) -> tuple[AliasResult, Takeover | None]:
            me = identity_of(conn, agent_id)
            holder = ms.identity_by_alias(conn, me.workspace_key, alias_key(alias))
            target = None if holder is None else found(conn, holder)
            decided = rules.decide_rename(
                alias, me, target, force=force, claim=claim, session_open=mine is not None
            )
            if isinstance(decided, rules.Refuse):
                refuse(conn, decided)
            if isinstance(decided, rules.TakeOver):
                assert mine is not None  # decide_rename: the caller's session is open
                done = take_over_by_alias(
                    conn,
                    decided.found,
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
