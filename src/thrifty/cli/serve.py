# SPDX-License-Identifier: MIT
"""`thrifty serve`: the local page and JSON API over thrifty's stores (thrifty.serve). The serve
extra's packages are imported inside the command: without them it says in one line how to
install them."""

from pathlib import Path
from typing import Annotated

import typer

from thrifty.cli.common import stderr
from thrifty.errors import ThriftyError

SHUTDOWN_GRACE_S = 2  # seconds open requests get to finish after a stop signal
INSTALL = "thrifty serve needs FastAPI, uvicorn and Plotly: pip install 'thrifty[serve]'"


def _installed(module: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder refused it
        return False


def _check_serve_packages() -> None:
    missing = [m for m in ("fastapi", "uvicorn", "plotly") if not _installed(m)]
    if missing:
        raise ThriftyError(f"{INSTALL} (missing: {', '.join(missing)})")


def serve(
    db: Annotated[list[Path] | None, typer.Option("--db", help="thrifty database to show; repeatable")] = None,
    campaign_db: Annotated[list[Path] | None, typer.Option(
        "--campaign-db", help="MD campaign database (thrifty md sweep --db); repeatable")] = None,
    watch: Annotated[list[Path] | None, typer.Option(
        "--watch", help="Folder of training run folders and thrifty run checkpoint folders, shown live; "
                        "repeatable")] = None,
    surrogate: Annotated[Path | None, typer.Option(
        help="Model folder of thrifty md train-surrogate: profiles for typed parameters, campaign accuracy")] = None,
    host: Annotated[str, typer.Option(
        help="Address to bind (anything but loopback: writes need THRIFTY_SERVE_TOKEN)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: a free one)", min=0, max=65535)] = 8477,
    allow_writes: Annotated[bool, typer.Option(
        "--allow-writes", help="Allow starting plans and stopping jobs, with the token")] = False,
) -> None:
    """Serve a page and a JSON API over plans, searches, training runs and MD campaigns."""
    _check_serve_packages()
    from thrifty.serve.campaigns import CAMPAIGN_TABLES
    from thrifty.serve.readonly import check_database, enable_wal
    from thrifty.serve.security import Access, is_loopback
    from thrifty.serve.settings import ServeSettings
    from thrifty.store import TABLES
    dbs, campaigns, folders = list(db or []), list(campaign_db or []), list(watch or [])
    if not dbs and not campaigns and not folders and surrogate is None:
        raise ThriftyError("nothing to serve: give --db, --campaign-db, --watch or --surrogate")
    for path in dbs:
        check_database(path, TABLES, "--db", ("--campaign-db", CAMPAIGN_TABLES))
    for path in campaigns:
        check_database(path, CAMPAIGN_TABLES, "--campaign-db", ("--db", TABLES))
    for folder in folders:
        if not folder.is_dir():
            raise ThriftyError(f"--watch {folder} is not a folder")
    if surrogate is not None:
        from thrifty.extras import require
        require("torch")
        from thrifty.md.surrogate import MODEL_FILE
        if not (surrogate / MODEL_FILE).is_file():
            raise ThriftyError(f"--surrogate {surrogate}: no {MODEL_FILE} there (train one with "
                               "thrifty md train-surrogate)")
    for path in dbs + campaigns:
        if not enable_wal(path):
            stderr.print(f"[yellow]warning:[/] {path} could not be put in WAL mode; a writer may wait for a read",
                         soft_wrap=True)
    if not is_loopback(host):
        stderr.print(f"[yellow]warning:[/] serving on {host}: anyone who reaches it can read these stores",
                     soft_wrap=True)
    access = Access.decide(host, allow_writes)
    settings = ServeSettings(tuple(dbs), tuple(campaigns), tuple(folders), surrogate, access, host, port)
    _run(settings)


def _run(settings) -> None:
    import socket

    import uvicorn

    from thrifty.serve.app import create_app
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        raise ThriftyError(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}") from None
    port = sock.getsockname()[1]
    from dataclasses import replace
    app = create_app(replace(settings, port=port))  # the Host header check names the port bound
    shown = f"[{settings.host}]" if ":" in settings.host else settings.host
    stderr.print(f"thrifty serve: http://{shown}:{port}/ ({settings.access.reason})", soft_wrap=True)
    if settings.access.token_printed:
        stderr.print(f"write token (shown once): {settings.access.token}", soft_wrap=True)
    # idle keep-alive connections kept 75 s (uvicorn's default, 5 s, races a client's next request on a
    # busy machine: the request meets a connection being closed); the page's event stream is not idle
    # on Ctrl-C or SIGTERM the open event streams (every page keeps one, and uvicorn waits for them)
    # end at their next poll; SHUTDOWN_GRACE_S more, and uvicorn cancels what is left (the server had
    # ignored the signal while a page was open)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=75,
                            timeout_graceful_shutdown=SHUTDOWN_GRACE_S)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            app.state.stopping.set()
            super().handle_exit(sig, frame)
    Server(config).run(sockets=[sock])
