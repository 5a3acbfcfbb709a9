"""Agent programs: an env agent played by a program of its own, in any process and language.

An agent program is a policy like the framework adapters: for each turn the env hands it the
observation, the env's tools and a model endpoint; its answer is the action, and the env stays
the judge. Every LLM call it makes goes through the gateway (OpenAI or Anthropic API), which
records it with its token ids; those calls are the turn's ``inner_calls``, what LightningRL
learns from. Nothing in the program refers to boltzoo.

Two ways to run one:

* :class:`AgentCommand`: run a command once per turn (``boltzoo eval|rollout|train ENV
  --agent-command "python my_agent.py"``), with the turn in its environment variables::

      OPENAI_BASE_URL     the gateway session of this rollout and agent (ends in /v1)
      OPENAI_API_KEY      this rollout's key (also ANTHROPIC_API_KEY, BOLTZOO_API_KEY)
      ANTHROPIC_BASE_URL  the same session for the Anthropic SDK (without /v1)
      BOLTZOO_MODEL       the model to ask for (GET $OPENAI_BASE_URL/models lists it)
      BOLTZOO_TASK        the observation as JSON: {"agent", "task_id", "messages"}
      BOLTZOO_PROMPT      the last user message, as plain text
      BOLTZOO_AGENT       the env agent this turn is for (BOLTZOO_ENV: the env's id)
      BOLTZOO_AGENTS_URL  .../agents: $BOLTZOO_AGENTS_URL/NAME/v1 calls the model as NAME
      BOLTZOO_ROLLOUT_URL the rollout's own endpoints (below)
      BOLTZOO_MCP_URL     the env's tools as an MCP server (streamable HTTP, the key in the
                          URL; with boltzoo[agents])

  The action is what the program POSTs to ``$BOLTZOO_ROLLOUT_URL/answer``, else its standard
  output. A non-zero exit, a crash, or running past ``timeout_s`` (its process group is killed)
  fails the episode: it is dropped with its group and counted, never scored 0.
* :class:`AgentService`: a long-running program (a server, or one on other machines) claims
  turns itself: ``POST /rollouts/claim`` on the hub (a long poll) returns the same fields as the
  variables above, and it answers through the rollout's endpoints. A claimed turn whose program
  goes silent (no heartbeat, tool call, model call or answer) for ``timeout_s`` fails; so does a
  turn nobody claims within ``claim_timeout_s``. With ``push_url`` the hub POSTs each turn to
  the service instead, which may answer in its response (``{"answer": ...}``).

The rollout's endpoints (:class:`AgentHub`; ``Authorization: Bearer <the rollout's key>``):

* ``GET  /rollouts/{id}``: the task, the tools (OpenAI format) and the URLs;
* ``POST /rollouts/{id}/tools/{name}`` (the arguments as a JSON object): runs the env's tool in
  the env's sandbox, exactly as a tool call written in text; returns ``{"output": text}``;
* ``POST /rollouts/{id}/answer`` (``{"answer": text}``): the action; the rollout then ends;
* ``POST /rollouts/{id}/reward`` (``{"reward": number, "call_id": optional}``): an
  agent-reported reward, for envs that take them (403 for envs that judge their own tasks);
* ``POST /rollouts/{id}/heartbeat``: a sign of life (services);
* ``/rollouts/{id}/mcp``: the tools over MCP.

Anything sent to a rollout that has ended (a second answer included) gets 409 and changes
nothing; its gateway session is closed too, so its late model calls get 409 as well.

A program may play several roles: each LLM call is made as the agent its URL names
(``$BOLTZOO_AGENTS_URL/checker/v1``); a call made as another name than the turn's env agent is
that name's (``Completion.node``), and ``train_agents`` / ``policy_map`` select and map those
names as they do a graph's nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import secrets
import signal
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.routing import Route

from boltzoo.agents.base import Policy, Turn
from boltzoo.agents.gateway import (
    BackgroundServer,
    Gateway,
    GatewayError,
    RecordedCall,
    _api_key,
    _same_key,
    parse_body,
    read_body,
)
from boltzoo.envs.base import ToolSpec
from boltzoo.episode import Completion
from boltzoo.errors import AgentProgramError, shorten

MAX_OUTPUT_BYTES = 1_000_000  # a program's standard output kept at most (the rest is dropped)
STDERR_TAIL_BYTES = 2_000  # the end of its standard error, quoted when it fails
MAX_CLAIM_WAIT_S = 60.0


@dataclass
class Rollout:
    """One turn of an env agent, handed to a program: its task, tools, answer and state."""

    rollout_id: str
    token: str
    turn: Turn
    tools: dict[str, ToolSpec]
    model: str
    timeout_s: float
    answer: str | None = None
    error: str | None = None
    ended: bool = False  # sealed: the program can change nothing any more
    calls: list[RecordedCall] = field(default_factory=list)  # its session's, once sealed
    claimed: bool = False
    last_seen: float = field(default_factory=time.monotonic)
    opened: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)  # the env: one call at a time
    done: threading.Event = field(default_factory=threading.Event)  # answered, failed or ended

    @property
    def agent(self) -> str:
        """Return the env agent this turn is for."""
        return self.turn.agent

    def touch(self) -> None:
        """Note a sign of life of the program (for the silence timeout of services)."""
        self.last_seen = time.monotonic()


def _last_user_message(observation: Mapping[str, Any]) -> str:
    users = [m for m in observation.get("messages", []) if m.get("role") == "user"]
    return str(users[-1]["content"]) if users else ""


class AgentHub:
    """The HTTP side of agent programs: each rollout's task, tools (HTTP and MCP), answer and
    reward, and the queue of turns that services claim (a context manager, like the gateway).

    Args:
        gateway: the gateway whose sessions the programs' model calls go to (one session per
            rollout, opened with the rollout's key, closed when the rollout ends).
        host, port: where to listen (loopback unless ``host`` says otherwise; then ``api_key``
            is required).
        api_key: what services must send to claim turns (rollout endpoints take the rollout's
            own key, or this one).
        max_body_bytes: larger request bodies get 413.
    """

    def __init__(
        self,
        gateway: Gateway,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        api_key: str | None = None,
        max_body_bytes: int = 4_000_000,
    ):
        if host not in ("127.0.0.1", "localhost", "::1") and not api_key:
            raise ValueError(
                f"an agent hub listening on {host!r} (beyond this machine) needs an api_key"
            )
        self.gateway = gateway
        self.api_key = api_key
        self.max_body_bytes = int(max_body_bytes)
        self.rollouts: dict[str, Rollout] = {}
        self._claimable: deque[Rollout] = deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._offered: asyncio.Event | None = None  # set when a turn is queued for claims
        self._serving = BackgroundServer(host, port, "boltzoo-agent-hub")

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Return ``http://host:port``."""
        return self._serving.url

    def start(self) -> AgentHub:
        """Start serving in a background thread; return the hub once it answers."""
        if not self._serving.serving:
            self._serving.start(self._app(), graceful_s=5)
        return self

    def close(self) -> None:
        """End every open rollout and stop serving."""
        for rollout in list(self.rollouts.values()):
            self.end(rollout, "the agent hub closed")
        self._serving.stop()

    def __enter__(self) -> AgentHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- rollouts --------------------------------------------------------------------------

    def open(self, turn: Turn, timeout_s: float) -> Rollout:
        """Open a rollout for ``turn``; return it (its model endpoint opens with
        :meth:`begin`, when a program takes it on)."""
        tools = {spec.name: spec for spec in getattr(turn.env, "tools", ())}
        rollout = Rollout(
            rollout_id=uuid.uuid4().hex,
            token=secrets.token_urlsafe(24),
            turn=turn,
            tools=tools,
            model=self.gateway.model_name,
            timeout_s=float(timeout_s),
        )
        with self._lock:
            self.rollouts[rollout.rollout_id] = rollout
        return rollout

    def begin(self, rollout: Rollout) -> None:
        """Open ``rollout``'s gateway session: a program works on it from now on (the
        gateway's batches wait for the programs working, not for turns queued for services)."""
        self.gateway.open_session(rollout.rollout_id, rollout.token, on_request=rollout.touch)

    def offer(self, rollout: Rollout) -> None:
        """Queue ``rollout`` for a service to claim."""
        with self._lock:
            self._claimable.append(rollout)
        if self._loop is not None and self._offered is not None:
            self._loop.call_soon_threadsafe(self._offered.set)

    def seal(self, rollout: Rollout, answer: str | None = None) -> None:
        """Close ``rollout`` to its program (``answer``: what it printed, its answer if it
        POSTed none): from now on every request to it, and to its gateway session, gets 409."""
        with rollout.lock:
            if answer is not None and rollout.answer is None:
                rollout.answer = answer
            if rollout.ended:
                return
            rollout.ended = True
        with self._lock:
            self.rollouts.pop(rollout.rollout_id, None)
            with contextlib.suppress(ValueError):
                self._claimable.remove(rollout)
        rollout.calls = self.gateway.close_session(rollout.rollout_id)

    def end(self, rollout: Rollout, error: str | None = None) -> list[RecordedCall]:
        """End ``rollout``: seal it, failed with ``error`` when given (a program that answered
        and then crashed fails all the same); return the model calls its gateway session
        recorded."""
        self.seal(rollout)
        with rollout.lock:
            if error is not None and rollout.error is None:
                rollout.error = error
        rollout.done.set()
        return rollout.calls

    def document(self, rollout: Rollout) -> dict[str, Any]:
        """Return what a program is told of its turn: the fields of the command's
        environment variables, as JSON (``GET /rollouts/{id}``, and a claim's answer)."""
        session = self.gateway.session_url(rollout.rollout_id, rollout.agent)
        agents_url = session.rsplit("/", 2)[0]  # .../sessions/{id}/agents
        rollout_url = f"{self.url}/rollouts/{rollout.rollout_id}"
        observation = rollout.turn.observation
        return {
            "rollout_id": rollout.rollout_id,
            "env": getattr(rollout.turn.env, "env_id", None),
            "agent": rollout.agent,
            "task_id": observation.get("task_id"),
            "task": {
                "agent": observation.get("agent", rollout.agent),
                "task_id": observation.get("task_id"),
                "messages": observation.get("messages", []),
            },
            "prompt": _last_user_message(observation),
            "tools": [spec.openai_schema() for spec in rollout.tools.values()],
            "model": rollout.model,
            "api_key": rollout.token,
            "openai_base_url": session,
            "anthropic_base_url": session[: -len("/v1")],
            "agents_url": agents_url,
            "rollout_url": rollout_url,
            # MCP clients take a URL (the key rides in it too: it lives as long as the turn)
            "mcp_url": f"{rollout_url}/mcp?key={rollout.token}",
            "timeout_s": rollout.timeout_s,
        }

    def environment(self, rollout: Rollout) -> dict[str, str]:
        """Return the environment variables a command gets for ``rollout``."""
        doc = self.document(rollout)
        return {
            "OPENAI_BASE_URL": doc["openai_base_url"],
            "OPENAI_API_KEY": rollout.token,
            "ANTHROPIC_BASE_URL": doc["anthropic_base_url"],
            "ANTHROPIC_API_KEY": rollout.token,
            "BOLTZOO_API_KEY": rollout.token,
            "BOLTZOO_MODEL": doc["model"],
            "BOLTZOO_TASK": json.dumps(doc["task"]),
            "BOLTZOO_PROMPT": doc["prompt"],
            "BOLTZOO_AGENT": rollout.agent,
            "BOLTZOO_ENV": doc["env"] or "",
            "BOLTZOO_AGENTS_URL": doc["agents_url"],
            "BOLTZOO_ROLLOUT_URL": doc["rollout_url"],
            "BOLTZOO_MCP_URL": doc["mcp_url"],
        }

    # --- what the endpoints do (also callable in process) ----------------------------------

    def _open_rollout(self, rollout_id: str, key: str | None) -> Rollout:
        """Return the open rollout ``rollout_id`` if ``key`` may act for it (else 401/404/409)."""
        rollout = self.rollouts.get(rollout_id)
        if rollout is None:
            raise GatewayError(
                409,
                f"rollout {rollout_id[:40]!r} is not open (it has ended, or never was)",
                "conflict",
            )
        if not (_same_key(key, rollout.token) or _same_key(key, self.api_key)):
            raise GatewayError(401, "a valid key for this rollout is needed", "auth")
        return rollout

    def call_tool(self, rollout: Rollout, name: str, arguments: Any) -> str:
        """Run tool ``name`` of the rollout's env with ``arguments``; return its output."""
        if name not in rollout.tools:
            raise GatewayError(
                404, f"no tool {name[:60]!r}; the tools are {sorted(rollout.tools)}", "not_found"
            )
        if not isinstance(arguments, dict):
            raise GatewayError(400, "a tool's arguments are a JSON object")
        with rollout.lock:
            if rollout.ended:
                raise GatewayError(409, "the rollout has ended", "conflict")
            rollout.touch()
            return rollout.turn.env.call_tool(rollout.agent, name, arguments)

    def answer(self, rollout: Rollout, text: Any) -> None:
        """Take the program's answer (the action); the rollout is then sealed: nothing the
        program does after its answer (a tool, a model call) counts."""
        if not isinstance(text, str):
            raise GatewayError(400, 'the answer must be a string: {"answer": "..."}')
        with rollout.lock:
            if rollout.ended or rollout.answer is not None:
                raise GatewayError(409, "this rollout has its answer already", "conflict")
            rollout.answer = text
        self.seal(rollout)
        rollout.done.set()

    def reward(self, rollout: Rollout, body: dict[str, Any]) -> None:
        """Pass an agent-reported reward to the rollout's env (400 for anything but a finite
        number, 403 when the env takes no rewards from agents)."""
        value, call_id = body.get("reward"), body.get("call_id")
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise GatewayError(400, f"the reward must be a finite number, got {shorten(value)}")
        if call_id is not None:
            served = {c.call_id for c in self.gateway.calls(rollout.rollout_id)}
            if call_id not in served:
                raise GatewayError(400, f"call_id {shorten(call_id)} is not a call of this rollout")
        env = rollout.turn.env
        if not getattr(env, "accepts_agent_rewards", False):
            raise GatewayError(
                403,
                f"{getattr(env, 'env_id', 'this env')} judges its own tasks: it takes no "
                "reward from agents",
                "forbidden",
            )
        with rollout.lock:
            if rollout.ended:
                raise GatewayError(409, "the rollout has ended", "conflict")
            rollout.touch()
            env.report_reward(rollout.agent, float(value), call_id=call_id)

    def claim(self, agents: Sequence[str] | None = None) -> Rollout | None:
        """Return the oldest queued turn (of one of ``agents``), now claimed; None if none."""
        with self._lock:
            claimed = next(
                (r for r in self._claimable if agents is None or r.agent in agents), None
            )
            if claimed is None:
                return None
            self._claimable.remove(claimed)
            claimed.claimed = True
            claimed.touch()
        self.begin(claimed)
        return claimed

    # --- the HTTP app ----------------------------------------------------------------------

    def _app(self) -> Any:
        mcp = _mcp_endpoint(self)

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            self._loop = asyncio.get_running_loop()
            self._offered = asyncio.Event()
            async with mcp.run() if mcp is not None else contextlib.nullcontext():
                yield

        app = FastAPI(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)

        def error(status: int, message: str, kind: str) -> JSONResponse:
            return JSONResponse(
                {"error": {"message": message, "type": kind, "code": status}}, status_code=status
            )

        @app.exception_handler(GatewayError)
        async def refused(request: Request, exc: GatewayError) -> JSONResponse:
            return error(exc.status, str(exc), exc.kind)

        @app.exception_handler(HTTPException)
        async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
            return error(
                exc.status_code, f"no route {request.method} {request.url.path[:100]}", "not_found"
            )

        @app.exception_handler(Exception)
        async def crashed(request: Request, exc: Exception) -> JSONResponse:
            return error(500, f"{type(exc).__name__}: {exc}"[:500], "server_error")

        async def body_of(request: Request) -> dict[str, Any]:
            raw = await read_body(request, self.max_body_bytes, self.gateway.body_timeout_s)
            return parse_body(raw or b"{}")

        async def in_thread(fn: Any, *args: Any) -> Any:
            return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

        @app.get("/health")
        async def health() -> dict[str, Any]:
            return {"status": "ok", "open_rollouts": len(self.rollouts)}

        @app.post("/rollouts/claim")
        async def claim(request: Request) -> Any:
            if self.api_key is not None and not _same_key(_api_key(request), self.api_key):
                raise GatewayError(401, "claiming turns needs the hub's API key", "auth")
            body = await body_of(request)
            wait = body.get("wait_s", 30.0)
            agents = body.get("agents")
            if (
                isinstance(wait, bool)
                or not isinstance(wait, int | float)
                or not (0 <= wait <= MAX_CLAIM_WAIT_S)
            ):
                raise GatewayError(400, f"wait_s must be a number from 0 to {MAX_CLAIM_WAIT_S:g}")
            if agents is not None and not (
                isinstance(agents, list) and all(isinstance(a, str) for a in agents)
            ):
                raise GatewayError(400, "agents must be a list of agent names")
            deadline = time.monotonic() + float(wait)
            while True:
                rollout = self.claim(agents)
                if rollout is not None:
                    return self.document(rollout)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return Response(status_code=204)
                self._offered.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._offered.wait(), remaining)

        @app.get("/rollouts/{rollout_id}")
        async def task(request: Request, rollout_id: str) -> dict[str, Any]:
            rollout = self._open_rollout(rollout_id, _api_key(request))
            rollout.touch()
            return self.document(rollout)

        @app.post("/rollouts/{rollout_id}/tools/{name}")
        async def tool(request: Request, rollout_id: str, name: str) -> dict[str, Any]:
            rollout = self._open_rollout(rollout_id, _api_key(request))
            arguments = await body_of(request)
            return {"output": await in_thread(self.call_tool, rollout, name, arguments)}

        @app.post("/rollouts/{rollout_id}/answer")
        async def answer(request: Request, rollout_id: str) -> dict[str, Any]:
            rollout = self._open_rollout(rollout_id, _api_key(request))
            body = await body_of(request)
            self.answer(rollout, body.get("answer"))
            return {"rollout_id": rollout_id, "status": "answered"}

        @app.post("/rollouts/{rollout_id}/reward")
        async def reward(request: Request, rollout_id: str) -> dict[str, Any]:
            rollout = self._open_rollout(rollout_id, _api_key(request))
            body = await body_of(request)
            await in_thread(self.reward, rollout, body)
            return {"rollout_id": rollout_id, "status": "rewarded"}

        @app.post("/rollouts/{rollout_id}/heartbeat")
        async def heartbeat(request: Request, rollout_id: str) -> dict[str, Any]:
            rollout = self._open_rollout(rollout_id, _api_key(request))
            rollout.touch()
            return {"rollout_id": rollout_id, "status": "alive"}

        if mcp is not None:
            app.router.routes.append(Route("/rollouts/{rollout_id}/mcp", endpoint=mcp))
        return app


class _MCPEndpoint:
    """The env's tools over MCP (streamable HTTP, stateless JSON), one server for every
    rollout: the rollout comes from the URL, its key from the request's bearer token."""

    def __init__(self, hub: AgentHub):
        import mcp_types as types
        from mcp.server import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.hub, self.types = hub, types

        def rollout_of(ctx: Any) -> Rollout:
            return ctx.request.scope["boltzoo.rollout"]

        async def list_tools(ctx: Any, params: Any) -> Any:
            rollout = rollout_of(ctx)
            return types.ListToolsResult(
                tools=[
                    types.Tool(name=s.name, description=s.description, input_schema=s.parameters)
                    for s in rollout.tools.values()
                ]
            )

        async def call_tool(ctx: Any, params: Any) -> Any:
            rollout = rollout_of(ctx)
            try:
                output = await asyncio.get_running_loop().run_in_executor(
                    None, hub.call_tool, rollout, params.name, dict(params.arguments or {})
                )
            except GatewayError as error:
                return types.CallToolResult(
                    content=[types.TextContent(text=f"error: {error}")], is_error=True
                )
            return types.CallToolResult(content=[types.TextContent(text=output)])

        server = Server(
            "boltzoo-rollout", version="0", on_list_tools=list_tools, on_call_tool=call_tool
        )
        self.manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)

    def run(self) -> Any:
        return self.manager.run()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        rollout_id = scope["path_params"]["rollout_id"]
        request = Request(scope)
        key = _api_key(request) or request.query_params.get("key")
        try:
            rollout = self.hub._open_rollout(rollout_id, key)
        except GatewayError as error:
            body = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": self.types.INVALID_REQUEST, "message": str(error)},
            }
            await JSONResponse(body, status_code=error.status)(scope, receive, send)
            return
        rollout.touch()
        scope["boltzoo.rollout"] = rollout
        await self.manager.handle_request(scope, receive, send)


def _mcp_endpoint(hub: AgentHub) -> _MCPEndpoint | None:
    """Return the MCP endpoint of ``hub``, or None without the ``mcp`` package."""
    try:
        return _MCPEndpoint(hub)
    except ImportError:
        return None


# --- the policies ----------------------------------------------------------------------------


PROGRAM_BATCH_WAIT_S = 1.0  # the longest a batch waits for the programs about to ask


def program_gateway(
    model: Policy | None,
    host: str = "127.0.0.1",
    api_key: str | None = None,
    routes: Mapping[str, Policy] | None = None,
    model_name: str | None = None,
) -> Gateway:
    """Return a started gateway for agent programs: only rollouts' sessions are served, and a
    batch waits (up to ``PROGRAM_BATCH_WAIT_S``) for the programs still about to ask, so that
    their calls are sampled together as an in-process rollout's are."""
    return Gateway(
        model,
        host=host,
        routes=routes,
        model_name=model_name,
        api_key=api_key,
        require_session=True,
        batch_wait_s=PROGRAM_BATCH_WAIT_S,
    ).start()


class _AgentProgramPolicy:
    """What commands and services share: a hub and a gateway, a rollout per turn, the answer
    and the recorded calls made into the turn's Completion (or a failure)."""

    kind = ""

    def __init__(
        self,
        model: Policy | Gateway,
        *,
        timeout_s: float = 120.0,
        concurrency: int = 16,
        hub: AgentHub | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
    ):
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.timeout_s = float(timeout_s)
        self.concurrency = int(concurrency)
        self._own_gateway = not isinstance(model, Gateway)
        self.gateway = (
            model if isinstance(model, Gateway) else program_gateway(model, host, api_key)
        )
        self._own_hub = hub is None
        self.hub = (
            hub
            if hub is not None
            else AgentHub(self.gateway, host=host, port=port, api_key=api_key).start()
        )

    @property
    def version(self) -> int | None:
        """The version of the weights behind the gateway (its policy owns it)."""
        return getattr(self.gateway.policy, "version", None)

    def _options(self) -> dict[str, Any]:
        """Return the keyword arguments that make this policy again (with its gateway)."""
        return {"timeout_s": self.timeout_s, "concurrency": self.concurrency}

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Shipped to a Ray rollout worker, the policy comes back with a copy of its gateway
        # serving the worker's copy of the model (Gateway.__reduce__) and a hub of its own.
        if not self._own_hub and self.hub.api_key is not None:
            raise TypeError("a policy on a shared agent hub with an API key cannot be copied")
        return (_rebuilt, (type(self), self.gateway, self._options()))

    def close(self) -> None:
        """Stop the hub and the gateway this policy started (not those it was given)."""
        if self._own_hub:
            self.hub.close()
        if self._own_gateway:
            self.gateway.close()

    def __enter__(self) -> _AgentProgramPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def act(self, turns: Sequence[Turn]) -> list[Completion | AgentProgramError]:
        """Return one Completion per turn (the program's answer, its model calls as
        ``inner_calls``), or an :class:`AgentProgramError` for a turn whose program failed."""
        return asyncio.run(self._act_all(turns))

    async def _act_all(self, turns: Sequence[Turn]) -> list[Completion | AgentProgramError]:
        limit = asyncio.Semaphore(self.concurrency)

        async def one(turn: Turn) -> Completion | AgentProgramError:
            async with limit:
                rollout = self.hub.open(turn, self.timeout_s)
                try:
                    problem = await self._play(rollout)
                except Exception as error:  # never lose the turn's record over our own error
                    problem = f"{type(error).__name__}: {error}"
                calls = self.hub.end(rollout, problem)
                return self._result(rollout, calls)

        return list(await asyncio.gather(*(one(turn) for turn in turns)))

    async def _play(self, rollout: Rollout) -> str | None:
        """Run the program on ``rollout`` until it answers or fails; return what went wrong
        (None: nothing)."""
        raise NotImplementedError

    def _result(
        self, rollout: Rollout, calls: list[RecordedCall]
    ) -> Completion | AgentProgramError:
        if rollout.error is not None or rollout.answer is None:
            error = rollout.error or "the program gave no answer"
            return AgentProgramError(f"{self.kind} for {rollout.agent!r}: {error}")
        inner = [
            call.completion
            if call.agent in (None, rollout.agent)
            else _as_node(call.completion, call.agent)
            for call in calls
        ]
        return Completion(
            text=rollout.answer,
            inner_calls=inner,
            model=f"{self.kind}:{self.gateway.model_name}",
            policy_version=self.version,
            finish_reason="stop",
            agent_answer=True,
        )


def _as_node(completion: Completion, role: str) -> Completion:
    import dataclasses

    return dataclasses.replace(completion, node=role)


class AgentCommand(_AgentProgramPolicy):
    """An env agent played by a command, run once per turn (see the module docstring).

    Args:
        command: a shell command line (``"python my_agent.py"``, ``"node agent.js"``).
        model: the model the program calls: a policy (served by a gateway of this policy's
            own) or a started :class:`Gateway` (a trainer's).
        timeout_s: a run taking longer is killed (its whole process group) and fails.
        concurrency: programs running at once.
        cwd: the working folder.
        env: variables added to this process's environment.
        hub: the :class:`AgentHub` to use (default: one of its own, on ``host``, ``port``,
            with ``api_key``).
        host: where its own hub listens.
        port: its own hub's port (0: a free one).
        api_key: its own hub's API key.
    """

    kind = "command"

    def __init__(
        self,
        command: str,
        model: Policy | Gateway,
        *,
        timeout_s: float = 120.0,
        concurrency: int = 16,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        hub: AgentHub | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
    ):
        if not isinstance(command, str) or not command.strip():
            raise ValueError(f"an agent command must be a command line, got {shorten(command)}")
        self.command = command
        self.cwd = cwd
        self.extra_env = dict(env or {})
        super().__init__(
            model,
            timeout_s=timeout_s,
            concurrency=concurrency,
            hub=hub,
            host=host,
            port=port,
            api_key=api_key,
        )

    def _options(self) -> dict[str, Any]:
        return super()._options() | {
            "command": self.command,
            "cwd": self.cwd,
            "env": self.extra_env,
        }

    async def _play(self, rollout: Rollout) -> str | None:
        environment = os.environ | self.extra_env | self.hub.environment(rollout)
        self.hub.begin(rollout)
        process = await asyncio.create_subprocess_shell(
            self.command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment,
            cwd=self.cwd,
            start_new_session=True,  # its own process group: a timeout kills all of it
        )
        out, err = bytearray(), bytearray()
        readers = [
            asyncio.create_task(_read_into(process.stdout, out, MAX_OUTPUT_BYTES, keep="head")),
            asyncio.create_task(_read_into(process.stderr, err, STDERR_TAIL_BYTES, keep="tail")),
        ]
        # the process's exit, not its pipes' end: a child it left behind may hold them open
        timed_out = not await _exited(process, self.timeout_s)
        # sealed before the kill: what escaped its process group can answer nothing from the
        # deadline (or the exit) on, even in the moment the kill takes
        self.hub.seal(rollout)
        # what it left running goes too (a program's children die with its turn)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await _exited(process, 10.0)
        await asyncio.wait(readers, timeout=1.0)  # output still in the pipes, briefly
        for reader in readers:
            reader.cancel()
        with contextlib.suppress(Exception):
            process._transport.close()  # (asyncio's; the pipes a stray child holds are let go)
        tail = err.decode("utf-8", "replace").strip()[-STDERR_TAIL_BYTES:]
        said = f"; its stderr ends: {tail}" if tail else ""
        if timed_out:
            return f"`{_cut(self.command)}` ran past {self.timeout_s:g} s: killed{said}"
        if process.returncode != 0:
            how = (
                f"was killed by signal {-process.returncode}"
                if process.returncode < 0
                else f"exited with status {process.returncode}"
            )
            return f"`{_cut(self.command)}` {how}{said}"
        if rollout.answer is None:
            try:
                text = out.decode("utf-8").strip()
            except UnicodeDecodeError:
                return "its standard output is not UTF-8 text (and it POSTed no answer)"
            if not text:
                return (
                    f"`{_cut(self.command)}` exited 0 without an answer (nothing POSTed "
                    f"to .../answer, nothing on standard output){said}"
                )
            self.hub.seal(rollout, answer=text)
        return None

    def __repr__(self) -> str:
        return f"AgentCommand({self.command!r})"


def _cut(text: str, limit: int = 60) -> str:
    """Return ``text`` cut to ``limit`` characters (a command line quoted in a message)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def _read_into(stream: asyncio.StreamReader, kept: bytearray, limit: int, keep: str) -> None:
    """Read ``stream`` to its end into ``kept``: its first (``keep="head"``) or last ``limit``
    bytes (what was read stays there if the reading is cancelled)."""
    while chunk := await stream.read(65536):
        if keep == "head":
            kept.extend(chunk[: max(0, limit - len(kept))])
        else:
            kept.extend(chunk)
            del kept[:-limit]


async def _exited(process: asyncio.subprocess.Process, timeout_s: float) -> bool:
    """Return whether ``process`` exited within ``timeout_s`` (polled: asyncio's ``wait()`` also
    waits for its pipes, which a child it left running may hold open)."""
    deadline = time.monotonic() + timeout_s
    while process.returncode is None:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


class AgentService(_AgentProgramPolicy):
    """An env agent played by a long-running service that claims turns over HTTP (pull), or
    to which each turn is POSTed (push, with ``push_url``); see the module docstring.

    Args:
        model: the model the service calls: a policy or a started :class:`Gateway`.
        timeout_s: a claimed turn whose service shows no sign of life for this long fails.
        claim_timeout_s: a turn nobody claims within this fails.
        push_url: POST each turn's document here instead of waiting for claims; the response
            may hold the answer (``{"answer": ...}``), else the service answers later through
            the rollout's endpoints.
        concurrency: turns offered at once.
        hub: the :class:`AgentHub` (default: one of its own, on ``host``, ``port``, with
            ``api_key``).
        host: where its own hub listens (a host beyond this machine needs ``api_key``).
        port: its own hub's port (0: a free one).
        api_key: the key services send to claim turns.
    """

    kind = "service"

    def __init__(
        self,
        model: Policy | Gateway,
        *,
        timeout_s: float = 120.0,
        claim_timeout_s: float = 600.0,
        push_url: str | None = None,
        concurrency: int = 64,
        hub: AgentHub | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
    ):
        self.claim_timeout_s = float(claim_timeout_s)
        self.push_url = push_url
        super().__init__(
            model,
            timeout_s=timeout_s,
            concurrency=concurrency,
            hub=hub,
            host=host,
            port=port,
            api_key=api_key,
        )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        raise TypeError(
            "an agent service claims turns from one hub: it cannot move to a Ray worker "
            "(use rollout workers with agent commands, or run the services against this hub)"
        )

    @property
    def claim_url(self) -> str:
        """Return the URL services POST to claim turns."""
        return f"{self.hub.url}/rollouts/claim"

    async def _play(self, rollout: Rollout) -> str | None:
        if self.push_url is not None:
            problem = await asyncio.get_running_loop().run_in_executor(None, self._push, rollout)
            if problem is not None or rollout.answer is not None:
                return problem
            rollout.claimed = True
        else:
            self.hub.offer(rollout)
        while not rollout.done.is_set():
            now = time.monotonic()
            if not rollout.claimed and now - rollout.opened > self.claim_timeout_s:
                return f"no service claimed the turn within {self.claim_timeout_s:g} s"
            if rollout.claimed and now - rollout.last_seen > self.timeout_s:
                return f"the service went silent for {self.timeout_s:g} s after claiming the turn"
            await asyncio.sleep(0.02)
        return None

    def _push(self, rollout: Rollout) -> str | None:
        """POST the turn to ``push_url``; take an answer from the response if it holds one."""
        self.hub.begin(rollout)
        request = urllib.request.Request(
            self.push_url,
            data=json.dumps(self.hub.document(rollout)).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                text = response.read(MAX_OUTPUT_BYTES)
        except urllib.error.HTTPError as error:
            return f"the service at {self.push_url} answered {error.code}"
        except (urllib.error.URLError, OSError) as error:
            return f"the service at {self.push_url} could not be reached: {error}"
        rollout.touch()
        try:
            body = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            return f"the service's response is not JSON: {text[:80]!r}"
        if isinstance(body, dict) and "answer" in body:
            try:
                self.hub.answer(rollout, body["answer"])
            except GatewayError as error:
                if rollout.answer is None:
                    return f"the service's answer was refused: {error}"
        return None

    def __repr__(self) -> str:
        return f"AgentService({self.push_url or self.claim_url})"


def _rebuilt(kind: type, gateway: Gateway, options: dict[str, Any]) -> Any:
    return kind(model=gateway, **options)


def agent_program(
    model: Policy | Gateway,
    *,
    command: str | None = None,
    service: str | None = None,
    push_url: str | None = None,
    timeout_s: float = 120.0,
    concurrency: int = 16,
    claim_timeout_s: float = 600.0,
    api_key: str | None = None,
) -> AgentCommand | AgentService:
    """Return the policy of an agent program calling ``model``: a ``command`` run per turn, a
    service that claims turns from a hub listening at ``service`` (``"host:port"``), or one
    each turn is POSTed to (``push_url``). Exactly one of the three."""
    given = [
        name
        for name, v in (("command", command), ("service", service), ("push_url", push_url))
        if v is not None
    ]
    if len(given) != 1:
        raise ValueError(
            f"an agent program is a command, a service or a push URL: give one (got {given})"
        )
    if command is not None:
        return AgentCommand(
            command, model, timeout_s=timeout_s, concurrency=concurrency, api_key=api_key
        )
    host, port = "127.0.0.1", 0
    if service is not None:
        host, _, port_text = service.rpartition(":")
        if not host or not port_text.isdigit():
            raise ValueError(f"an agent service listens at host:port, got {service!r}")
        port = int(port_text)
    return AgentService(
        model,
        timeout_s=timeout_s,
        claim_timeout_s=claim_timeout_s,
        push_url=push_url,
        concurrency=concurrency,
        host=host.strip("[]"),
        port=port,
        api_key=api_key,
    )
