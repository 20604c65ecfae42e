"""Fuzz the REST API and the MCP tools with schemathesis, once per role (admin, agent, viewer); fail on any
5xx or internal error.

    .venv/bin/python .ci/fuzz.py [--database-url postgres://user@host:5432/fuzz] [--max-examples N]

Steps: make a fresh database and migrate it: by default the embedded PostgreSQL in a new, throwaway DATA_DIR
(started on demand, stopped after the last process using it exits); with ``--database-url``, that PostgreSQL
database, DROPPED and created anew, so name a throwaway one; create an agent in a group and one key per role;
start the real server (``manage.py serve``) on a free port; open the fuzz agent's guardrails and seed a few
memories and a conversation through the API, so that ids exist; then run ``schemathesis run`` against
``/api/schema/`` once per role with that role's key. The checks are ``not_a_server_error`` and
``error_envelope`` (.ci/fuzz_hooks.py). Then every MCP tool's arguments, drawn from its input schema by the
same strategies (.ci/fuzz_mcp.py), with no internal error allowed. Exits non-zero on any failure.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import stop_process_group, wait_ready  # noqa: E402 (the project's root on the path first)

sys.path.insert(0, str(ROOT / ".ci"))
from fuzz_mcp import fuzz_role  # noqa: E402 (beside this script)

PYTHON = str(ROOT / ".venv" / "bin" / "python")
MANAGE = [PYTHON, str(ROOT / "manage.py")]
AGENT, GROUP, USER = "fuzz-agent", "fuzz-team", "fuzz-user"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([*MANAGE, *args], env=env, cwd=ROOT, check=True, capture_output=True, text=True)  # noqa: S603
    return done.stdout


def _fresh_database(env: dict[str, str]) -> None:
    url = env.get("DATABASE_URL", "")
    if url:  # the embedded server's DATA_DIR is new: its database is empty
        import psycopg

        parsed = urllib.parse.urlsplit(url)
        name = parsed.path.lstrip("/")
        admin_url = urllib.parse.urlunsplit(parsed._replace(path="/postgres"))
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    _manage(env, "migrate", "--noinput", "-v", "0")


def _keys(env: dict[str, str]) -> dict[str, str]:
    _manage(env, "createagent", AGENT, "--group", GROUP)
    keys = {}
    for role in ("admin", "agent", "viewer"):
        extra = ["--agent", AGENT] if role == "agent" else []
        keys[role] = _manage(env, "createapikey", "--role", role, *extra).strip().splitlines()[-1]
    return keys


def _call(base: str, key: str, method: str, path: str, body: object = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)  # noqa: S310
    request.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        text = response.read()
    return json.loads(text) if text else None


def _seed(base: str, keys: dict[str, str]) -> None:
    """A few entries of every visibility, and a conversation with messages, so generated ids can hit."""
    memories = "/usermemorystore/memories"
    # Guardrails no schema can state (an agent's categories, key length, writes per turn) opened wide, so
    # generated writes reach the store instead of stopping at a guardrail or at 429 after ten writes.
    policy = {
        "maxEntriesPerUser": 1_000_000,
        "guardrails": {
            "maxKeyLength": 255,
            "maxValueLength": 100_000,
            "maxWritesPerTurn": 10_000,
            "allowedCategories": [],
        },
    }
    _call(base, keys["admin"], "PATCH", f"/v1/agents/{AGENT}", {"memoryPolicy": policy})
    for visibility in ("self", "group", "global"):
        _call(
            base,
            keys["agent"],
            "PUT",
            memories,
            {"userId": USER, "key": f"k-{visibility}", "value": visibility, "visibility": visibility},
        )
    _call(base, keys["admin"], "POST", f"/propertiesstore/properties/{USER}", {"name": "Fuzz"})
    conversation = _call(base, keys["agent"], "POST", "/v1/conversations", {"userId": USER, "title": "fuzz"})
    conversation_id = conversation["id"]  # type: ignore[index]  # _call returns the JSON body, here an object
    _call(
        base,
        keys["agent"],
        "POST",
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": [{"type": "text", "text": "hello"}], "sessionId": "s1"},
    )


def _start_server(env: dict[str, str], port: int, log_path: Path) -> subprocess.Popen[bytes]:
    args = ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2", "--threads", "2"]
    with log_path.open("w") as log:
        server = subprocess.Popen(  # noqa: S603
            [*MANAGE, *args, "--no-background"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    wait_ready(server, f"http://127.0.0.1:{port}", log_path)
    return server


def _fuzz_rest(
    base: str, keys: dict[str, str], env: dict[str, str], options: argparse.Namespace, work: Path
) -> list[str]:
    """``schemathesis run`` over /api/schema/ once per role; the roles that failed."""
    failed = []
    schemathesis = shutil.which("schemathesis", path=str(Path(PYTHON).parent))
    if schemathesis is None:
        sys.exit("schemathesis is not installed (make install-test)")
    hooks_env = {**env, "SCHEMATHESIS_HOOKS": "fuzz_hooks", "PYTHONPATH": str(ROOT / ".ci")}
    for role in options.roles.split(","):
        report = Path(options.report_dir or work) / f"schemathesis-{role}.xml"
        argv = [
            schemathesis,
            "run",
            f"{base}/api/schema/",
            "--header",
            f"Authorization: Bearer {keys[role]}",
            "--checks",
            "not_a_server_error,error_envelope",
            "--max-examples",
            str(options.max_examples),
            "--workers",
            "1",  # hypothesis's lambda-source cache is not thread-safe: two workers can crash a run
            "--request-timeout",
            "30",
            "--suppress-health-check",
            "all",
            "--report",
            "junit",
            "--report-junit-path",
            str(report),
            "--no-color",
        ]
        if options.seed is not None:
            argv += ["--seed", str(options.seed)]
        print(f"== fuzz: role {role}", flush=True)
        done = subprocess.run(argv, env=hooks_env, cwd=ROOT, check=False)  # noqa: S603
        if done.returncode != 0:
            failed.append(role)
    return failed


def _fuzz_mcp(base: str, keys: dict[str, str], options: argparse.Namespace) -> list[str]:
    """Every MCP tool's arguments, drawn by schemathesis's strategies (.ci/fuzz_mcp.py), once per role; the
    roles that failed."""
    failed = []
    for role in options.roles.split(","):
        print(f"== fuzz: MCP tools as {role}", flush=True)
        calls, failures = fuzz_role(url=f"{base}/mcp/", key=keys[role], max_examples=options.mcp_max_examples)
        for failure in failures:
            print(f"   FAILED {failure}", flush=True)
        print(f"   {calls} calls, {len(failures)} failures", flush=True)
        if failures:
            failed.append(role)
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url",
        default=None,
        help="a throwaway PostgreSQL database: it is dropped first (default: "
        "the embedded PostgreSQL in a new DATA_DIR)",
    )
    parser.add_argument("--max-examples", type=int, default=25, help="test cases per operation and phase")
    parser.add_argument("--roles", default="admin,agent,viewer")
    parser.add_argument("--report-dir", default=None, help="keep schemathesis's JUnit reports here")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--doors", default="rest,mcp", help="rest (the OpenAPI), mcp (its tools), or both")
    parser.add_argument(
        "--mcp-max-examples", type=int, default=25, help="argument sets per MCP tool and mode (valid, not)"
    )
    options = parser.parse_args()

    env = {**os.environ}
    # Never the environment's DATABASE_URL: this script drops the database it is given.
    env.pop("DATABASE_URL", None)
    if options.database_url:
        env["DATABASE_URL"] = options.database_url
    else:
        env["DATA_DIR"] = tempfile.mkdtemp(prefix="fuzz-data-")
    env["LOG_LEVEL"] = "WARNING"
    work = Path(tempfile.mkdtemp(prefix="fuzz-run-"))
    where = env.get("DATABASE_URL") or f"the embedded PostgreSQL in {env['DATA_DIR']}"
    print(f"== fuzz: database {where}, work dir {work}", flush=True)
    _fresh_database(env)
    keys = _keys(env)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = _start_server(env, port, work / "server.log")
    failed = []
    try:
        _seed(base, keys)
        if "rest" in options.doors.split(","):
            failed += [f"REST as {role}" for role in _fuzz_rest(base, keys, env, options, work)]
        if "mcp" in options.doors.split(","):
            failed += [f"MCP as {role}" for role in _fuzz_mcp(base, keys, options)]
    finally:
        stop_process_group(server, timeout=15)
    errors = [line for line in (work / "server.log").read_text().splitlines() if "Traceback" in line]
    if errors:
        print(f"== fuzz: the server logged {len(errors)} tracebacks (see {work / 'server.log'})")
    if failed:
        print(f"== fuzz: FAILED for {', '.join(failed)}")
        return 1
    print("== fuzz: no server error and every error in the envelope, for every role")
    return 0


if __name__ == "__main__":
    sys.exit(main())
