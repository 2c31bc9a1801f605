from django.db import connection
from django.http import HttpRequest, JsonResponse


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and readiness: answers 200 only when the database answers."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any database failure means "not ready"
        return JsonResponse({"status": "error", "database": type(exc).__name__}, status=503)
    return JsonResponse({"status": "ok", "database": "ok"})


def livez(request: HttpRequest) -> JsonResponse:
    """Liveness only (no database): the process answers. Also the baseline of bench/api_load.py."""
    return JsonResponse({"status": "ok"})
