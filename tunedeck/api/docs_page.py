"""`/docs`: the API's interactive reference, Swagger UI served from this package's own static files.

The framework's default page loads Swagger UI from a CDN, which leaves it blank on a machine
without internet access. The assets are vendored under the dashboard's static files
(`web/static/vendor/swagger-ui`, whose VERSION note names the release); ReDoc is not served,
since it would need a second vendored bundle for the same document.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import HTMLResponse

DOCS_PATH = "/docs"
SWAGGER_FOLDER = "vendor/swagger-ui"


def install_docs(app: FastAPI, static_path: str) -> None:
    """Serve Swagger UI for `app`'s OpenAPI document at `/docs`, its assets from `static_path`."""
    assets = f"{static_path}/{SWAGGER_FOLDER}"
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(DOCS_PATH, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        """The interactive API reference, with no request leaving this server."""
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title}: API reference",
            swagger_js_url=f"{assets}/swagger-ui-bundle.js",
            swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon-32x32.png",
            # Swagger UI would otherwise fetch a validity badge from an outside service.
            swagger_ui_parameters={"validatorUrl": None},
        )
