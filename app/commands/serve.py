"""`roofline serve`: the model behind a local OpenAI-compatible HTTP API, with continuous batching.

Loopback only by default; any other address needs an API key (--api-key or ROOFLINE_API_KEY), else the
command refuses to start. The engine runs in its own process (app.engine.llama.batch); this process is the HTTP
server (app.server, Starlette on uvicorn). Started by the window (`--parent-pid`), it stops when the window is
gone, however the window ended: the engine child already follows its own parent the same way.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from app.commands import _args as A
from app.commands._common import add_model_arg, fail, resolve_model
from app.core.config.defaults import DEFAULT_SERVE_PORT
from app.core.gguf.kv_types import DEFAULT_KV_TYPE, KV_TYPES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the model over an OpenAI-compatible HTTP API (continuous batching)")
    add_model_arg(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=DEFAULT_SERVE_PORT, help="port (0: any free port)")
    p.add_argument("--parallel", "-np", type=int, default=4, help="sequences decoded together (slots)")
    p.add_argument("-c", "--ctx", type=int, default=8192,
                   help="KV cells shared by all slots; one request may use ctx / parallel")
    p.add_argument("--ubatch", type=int, default=512, help="tokens per decode step (prompt chunks + decodes)")
    p.add_argument("--queue", type=int, default=64, help="requests that may wait for a slot before 503")
    p.add_argument("-t", "--threads", type=A.threads, default=None)
    p.add_argument("-ngl", "--n-gpu-layers", type=int, default=0)
    p.add_argument("--n-cpu-moe", "-ncmoe", type=A.int_range(0), default=0, metavar="N",
                   help="MoE models: keep the expert weights of the first N blocks in RAM, the rest on the GPU")
    p.add_argument("--kv-type", default=DEFAULT_KV_TYPE, choices=KV_TYPES)
    p.add_argument("--api-key", default=None, help="required key (default: $ROOFLINE_API_KEY)")
    p.add_argument("--model-name", default=None, help="the model's id in the API (default: the file name)")
    p.add_argument("--chat-template", default=None, metavar="FILE",
                   help="a Jinja chat template file used instead of the model's own (e.g. one with tool support)")
    p.add_argument("--strict-model-names", action="store_true",
                   help="refuse requests naming another model (default: any name is served as the loaded model)")
    p.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)  # the window's: see exit_with_parent
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a Host name the server is reached by, besides loopback's and --host (repeatable)")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="a browser origin (http://host:port) allowed to call the API, with CORS (repeatable; "
                        "default: none)")
    p.add_argument("--max-connections", type=int, default=128,
                   help="connections open at once; more are closed at once")
    p.add_argument("--header-timeout", type=float, default=10.0,
                   help="seconds a connection has to send a request's headers (idle keep-alive: 5)")
    p.set_defaults(func=run)


def check_options(args: argparse.Namespace, api_key: str | None) -> str | None:
    """One line saying what is wrong with the options, or None."""
    from app.core.config.network import is_loopback

    if not is_loopback(args.host) and not api_key:
        return (f"refusing to listen on {args.host} without an API key: anyone who can reach this machine "
                "could use it. Pass --api-key KEY (or set ROOFLINE_API_KEY), or keep the default 127.0.0.1.")
    if not 1 <= args.parallel <= 64:
        return "--parallel must be between 1 and 64"
    if args.ctx // args.parallel < 64:
        return f"--ctx {args.ctx} leaves {args.ctx // args.parallel} tokens per request; give at least 64"
    if not 0 <= args.port <= 65535:
        return "--port must be between 0 and 65535"
    if args.ubatch < 1 or args.queue < 0:
        return "--ubatch must be at least 1 and --queue at least 0"
    if not 1 <= args.max_connections <= 65536 or not 0 < args.header_timeout <= 3600:
        return "--max-connections must be between 1 and 65536 and --header-timeout between 0 and 3600 s"
    for origin in args.allow_origin:
        if origin != "*" and not origin.startswith(("http://", "https://")):
            return f"--allow-origin {origin!r}: give an origin such as http://localhost:3000 (or *)"
    return None


PARENT_POLL_S = 0.5
PARENT_GRACE_S = 10.0  # after SIGTERM, time for uvicorn's graceful stop and the engine's shutdown


def exit_with_parent(pid: int) -> None:
    """Stop this server once process `pid` (the window that started it) is no longer its parent.

    A window killed with SIGKILL, or crashing, runs no shutdown code: without this its server (and the
    server's engine with its copy of the model) would keep the port and the memory until someone noticed.
    Polling getppid() works the same on Linux and macOS (prctl's parent-death signal is Linux only), and
    comparing with the pid given rather than the parent seen at start also catches a window that died
    before this thread ran."""
    if sys.platform == "win32":
        return  # getppid() does not change when the parent dies there

    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's graceful stop, then hub.close() in run()
        time.sleep(PARENT_GRACE_S)
        os._exit(3)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def run(args: argparse.Namespace) -> int:
    api_key = args.api_key or os.environ.get("ROOFLINE_API_KEY") or None
    problem = check_options(args, api_key)
    if problem:
        return fail(problem, 2)
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid)
    import uvicorn

    from app.engine import protocol as P
    from app.engine.client import EngineError
    from app.server.app import build_app
    from app.server.connections import guarded_h11
    from app.server.engine_queue import Hub
    from app.server.guards import allowed_hosts

    model = resolve_model(args.model)
    template = None
    if args.chat_template:
        try:
            template = Path(args.chat_template).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return fail(f"cannot read the chat template {args.chat_template}: {exc}")
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        return fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    config = P.LoadConfig(model_path=str(model), n_ctx=args.ctx, n_threads=args.threads,
                          n_gpu_layers=args.n_gpu_layers, n_cpu_moe=args.n_cpu_moe, type_k=args.kv_type,
                          type_v=args.kv_type,
                          n_batch=max(args.ubatch, 512), n_ubatch=args.ubatch, chat_template=template)
    hub = Hub(config, args.parallel, args.queue)
    try:
        loaded = hub.start()
    except EngineError as exc:
        sock.close()
        return fail(str(exc))
    model_id = args.model_name or Path(loaded.model_path).name
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"roofline serve: {model_id} ({loaded.model_desc}), {args.parallel} slots of "
          f"{loaded.n_ctx // args.parallel} tokens", file=sys.stderr)
    print(f"listening on http://{shown}:{port}/v1" + ("  (API key required)" if api_key else ""), flush=True)
    app = build_app(hub, model_id, api_key, hosts=allowed_hosts(args.host, args.allow_host),
                    origins=tuple(args.allow_origin), strict_model_names=args.strict_model_names)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                           timeout_graceful_shutdown=3, timeout_keep_alive=5,
                                           http=guarded_h11(args.max_connections, args.header_timeout)))
    try:
        server.run(sockets=[sock])
    finally:
        hub.close()
        sock.close()
    return 0
