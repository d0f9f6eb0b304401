# SPDX-License-Identifier: MIT
"""The ASGI app: the JSON API over the stores (read-only), the event stream, the page and its
assets, and the opt-in writes. `create_app(settings)` builds it; `thrifty serve` runs it with
uvicorn. Ids in paths are looked up, never used as paths: `{db}-{row}` for a database's rows,
`{db}-{name}` for campaigns, and the ids serve.watched gives the folders it found."""

import logging
import re
import sqlite3
import threading
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from thrifty.errors import ThriftyError
from thrifty.io import json_safe
from thrifty.serve import events, plans, steering, watched
from thrifty.serve.campaigns import CampaignDb, Surrogate
from thrifty.serve.page import PLOTLY_JS, STATIC, page_html
from thrifty.serve.readonly import readable
from thrifty.serve.runs import run_series
from thrifty.serve.security import allowed_hosts
from thrifty.serve.settings import ServeSettings
from thrifty.serve.stores import ThriftyDb

ROW_ID = re.compile(r"^(\d{1,4})-(\d{1,18})$")
CAMPAIGN_ID = re.compile(r"^(\d{1,4})-(.{1,200})$")

log = logging.getLogger(__name__)


class PlanAsk(BaseModel):
    # a misspelt field is refused (422), not ignored; an infinite deadline or budget is not "none"
    model_config = ConfigDict(extra="forbid")
    profile: str = Field(description="A stored profile's id, as /api/profiles gives it")
    objective: str = "cost"
    deadline_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    budget_usd: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_workers: int = Field(32, ge=1, le=4096)
    spot: str = "both"
    epochs: float | None = Field(None, gt=0, le=10_000, description="Epochs to the target at the workload's default "
                                 "batch, as plan's --epochs: needed for a profile without a calibration run")


def _not_found(what: str, key: str) -> HTTPException:
    return HTTPException(404, f"no {what} {key!r}")


def create_app(settings: ServeSettings) -> FastAPI:
    # no /docs or /redoc: FastAPI's pages load their scripts from a CDN; the schema is at /openapi.json
    app = FastAPI(title="thrifty serve", version="1", docs_url=None, redoc_url=None,
                  description="Plans, profiles, searches, training runs and MD campaigns, read-only by default.")
    app.state.stopping = threading.Event()  # set by the server on a stop signal: event streams end
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(settings.host, settings.port))
    dbs = [ThriftyDb(i, Path(p)) for i, p in enumerate(settings.dbs)]
    cdbs = [CampaignDb(i, Path(p)) for i, p in enumerate(settings.campaign_dbs)]
    roots = [Path(p) for p in settings.watch]
    surrogate = Surrogate(settings.surrogate) if settings.surrogate is not None else None
    log.info("serving %d database(s), %d campaign database(s), %d watched folder(s)%s; writes %s", len(dbs),
             len(cdbs), len(roots), ", a surrogate" if surrogate is not None else "",
             "on (with the token)" if settings.access.writes else "off")

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return JSONResponse({"error": f"{where}: {first.get('msg')}" if where else first.get("msg")}, status_code=422)

    @app.exception_handler(ThriftyError)
    async def refused(request: Request, exc: ThriftyError) -> JSONResponse:
        log.info("refused %s %s: %s", request.method, request.url.path, exc)
        return JSONResponse({"error": str(exc)}, status_code=400)

    @app.exception_handler(sqlite3.Error)
    async def unreadable(request: Request, exc: sqlite3.Error) -> JSONResponse:
        # a new user's pass: a database deleted or replaced while serve ran gave a bare 500 and a traceback
        gone = [str(path) for path in [db.path for db in dbs] + [db.path for db in cdbs] if not readable(path)]
        if gone:
            log.warning("%s %s: a served database cannot be read: %s", request.method, request.url.path, exc)
            return JSONResponse({"error": f"served database {', '.join(gone)} cannot be read ({exc}): moved, "
                                          "deleted or replaced since thrifty serve started?"}, status_code=503)
        log.error("%s %s: a database error", request.method, request.url.path, exc_info=exc)  # a bug, or a lock
        return JSONResponse({"error": f"database error: {exc}"}, status_code=500)

    def row(key: str, what: str) -> tuple[ThriftyDb, int]:
        match = ROW_ID.match(key)
        if not match or int(match.group(1)) >= len(dbs):
            raise _not_found(what, key)
        return dbs[int(match.group(1))], int(match.group(2))

    def scan() -> tuple[dict, dict]:
        return watched.scan(roots)

    def require_token(authorization: Annotated[str | None, Header()] = None) -> None:
        if not settings.access.writes:
            raise HTTPException(403, "writes are off: start thrifty serve with --allow-writes")
        if not settings.access.allows(authorization):
            log.warning("a write without the right token was refused (%s)",
                        "no Authorization header" if authorization is None else "wrong token")
            raise HTTPException(401, "a write needs the token: Authorization: Bearer TOKEN",
                                headers={"WWW-Authenticate": "Bearer"})

    @app.get("/api/health")
    def health() -> dict:
        runs, jobs = scan()
        paths = [db.path for db in dbs] + [db.path for db in cdbs]
        unreadable = [str(path) for path in paths if not readable(path)]
        return {"status": "degraded" if unreadable else "ok", "unreadable_databases": unreadable,
                "databases": len(dbs), "campaign_databases": len(cdbs), "watched": len(roots),
                "runs_watched": len(runs), "jobs": len(jobs), "surrogate": surrogate is not None,
                "writes": settings.access.writes}

    @app.get("/api/plans")
    def list_plans() -> list[dict]:
        return [p for db in dbs for p in db.plans()]

    @lru_cache(maxsize=32)
    def computed_plane(db_index: int, row_id: int) -> dict:
        db = dbs[db_index]
        stored = db.plan(row_id)
        if stored is None:  # get_plan checked; a plan cannot be deleted from a read-only store
            raise _not_found("plan", str(row_id))
        return plans.plane(db, stored)

    @app.get("/api/plans/{plan_id}")
    def get_plan(plan_id: str) -> dict:
        db, row_id = row(plan_id, "plan")
        if db.plan(row_id) is None:
            raise _not_found("plan", plan_id)
        return computed_plane(db.index, row_id)

    @app.post("/api/plans", dependencies=[Depends(require_token)], status_code=201)
    def new_plan(ask: PlanAsk) -> dict:
        db, row_id = row(ask.profile, "profile")
        try:
            return steering.start_plan(db, row_id, ask.objective, ask.deadline_s, ask.budget_usd, ask.max_workers,
                                       ask.spot, ask.epochs)
        except LookupError:
            raise _not_found("profile", ask.profile) from None

    @app.get("/api/profiles")
    def list_profiles() -> list[dict]:
        return [p for db in dbs for p in db.profiles()]

    @app.get("/api/searches")
    def list_searches() -> list[dict]:
        return [s for db in dbs for s in db.searches()]

    @app.get("/api/searches/{search_id}")
    def get_search(search_id: str) -> dict:
        db, row_id = row(search_id, "search")
        found = db.search(row_id)
        if found is None:
            raise _not_found("search", search_id)
        return found

    @app.get("/api/runs")
    def list_runs() -> list[dict]:
        folders, jobs = scan()
        live = [{**r.summary(), "job": getattr(watched.job_for_run(r, jobs), "id", None)} for r in folders.values()]
        return live + [r for db in dbs for r in db.runs()]

    @app.get("/api/runs/{run_id}")
    def get_run(run_id: str) -> dict:
        folders, jobs = scan()
        if run_id in folders:
            job = watched.job_for_run(folders[run_id], jobs)
            found: dict | None = {**folders[run_id].detail(), "job": None if job is None else job.state()}
        elif run_id.startswith("db"):
            db, row_id = row(run_id[2:], "run")
            found = db.run(row_id)
        else:
            found = None
        if found is None:
            raise _not_found("run", run_id)
        return json_safe({**found, "series": run_series(found["steps"])})

    @app.get("/api/jobs")
    def list_jobs() -> list[dict]:
        return [job.state() for job in scan()[1].values()]

    @app.post("/api/jobs/{job_id}/stop", dependencies=[Depends(require_token)])
    def stop_job(job_id: str) -> dict:
        jobs = scan()[1]
        if job_id not in jobs:
            raise _not_found("job", job_id)
        done = jobs[job_id].stop()
        if done["signalled"] is None:
            raise HTTPException(409, f"job {job_id} is not running under thrifty run")
        log.info("job %s stopped on request: %s", job_id, done)
        return done

    @app.get("/api/campaigns")
    def list_campaigns() -> list[dict]:
        return [c for cdb in cdbs for c in cdb.campaigns()]

    @app.get("/api/campaigns/{campaign_id}")
    def get_campaign(campaign_id: str) -> dict:
        match = CAMPAIGN_ID.match(campaign_id)
        found = None
        if match and int(match.group(1)) < len(cdbs):
            found = cdbs[int(match.group(1))].campaign(match.group(2), surrogate)
        if found is None:
            raise _not_found("campaign", campaign_id)
        return json_safe(found)

    @app.get("/api/surrogate")
    def surrogate_info() -> dict:
        if surrogate is None:
            raise HTTPException(404, "no surrogate: start thrifty serve with --surrogate MODEL_FOLDER")
        return surrogate.describe()

    @app.get("/api/surrogate/profile")
    def surrogate_profile(h_nm: Annotated[float, Query()], z_plus: Annotated[int, Query()],
                          c_molar: Annotated[float, Query()], d_plus_nm: Annotated[float, Query()],
                          d_minus_nm: Annotated[float, Query()], z_minus: Annotated[int, Query()] = -1) -> dict:
        if surrogate is None:
            raise HTTPException(404, "no surrogate: start thrifty serve with --surrogate MODEL_FOLDER")
        return surrogate.profile({"h_nm": h_nm, "z_plus": z_plus, "z_minus": z_minus, "c_molar": c_molar,
                                  "d_plus_nm": d_plus_nm, "d_minus_nm": d_minus_nm})

    @app.get("/api/events")
    async def event_stream(request: Request, limit: Annotated[int | None, Query(ge=1, le=10_000)] = None):
        watcher = events.Watcher(dbs, cdbs, scan)

        async def ended() -> bool:  # the client went, or the server is stopping (a stream never ends)
            return app.state.stopping.is_set() or await request.is_disconnected()
        return StreamingResponse(events.stream(watcher, ended, limit),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return page_html(writes=settings.access.writes)

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)  # none: a browser's automatic request answered without a 404

    @app.get("/assets/plotly.min.js")
    def plotly_js() -> FileResponse:
        return FileResponse(PLOTLY_JS, media_type="text/javascript")

    @app.get("/assets/page.js")
    def page_js() -> FileResponse:
        return FileResponse(STATIC / "page.js", media_type="text/javascript")

    @app.get("/assets/page.css")
    def page_css() -> FileResponse:
        return FileResponse(STATIC / "page.css", media_type="text/css")

    return app
