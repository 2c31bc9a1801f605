"""The realtime app: its system check (the configured voice engine can run) and the warm-up of the
engine's models when the ASGI application is built (realtime/routing.py), so that the first session
does not wait for a cold load."""

from __future__ import annotations

import gc
import logging
import threading

from django.apps import AppConfig
from django.core import checks

from knowledge.embeddings import session
from realtime.engine.brain import brain_preload
from realtime.engine.registry import EngineUnavailable, configuration_problems, pipeline_class
from realtime.engine.sound import mixer

logger = logging.getLogger(__name__)


class RealtimeConfig(AppConfig):
    name = "realtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        checks.register(check_voice_engine)
        # Post-call analysis: calls queues it through this once a call's end has committed (calls/analysis.py).
        from calls.analysis import register_queue
        from realtime.analysis.worker import analysis_queue

        register_queue(analysis_queue)


def check_voice_engine(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
    """A deployment whose VOICE_ENGINE or LLM_PROVIDER cannot run is refused at `manage.py check`
    (sessions are refused too, with close code 4500 and the same message)."""
    return [checks.Error(problem, id="realtime.E001") for problem in configuration_problems()]


def preload_in_background() -> threading.Thread | None:
    """Warm the configured engine at server start, so that the first session does not wait for it."""
    try:
        pipeline = pipeline_class()
    except EngineUnavailable as exc:
        logger.error("%s", exc)
        return None
    except ImportError:
        logger.exception("the voice engine cannot be imported")
        return None

    def run() -> None:
        try:
            mixer.preload()
            pipeline.preload()
        except Exception:
            logger.exception("voice engine preload failed; sessions will retry")
        try:
            brain_preload()  # the SDK of an OpenAI-compatible brain
        except Exception:
            logger.exception("language model preload failed; the first conversation will retry")
        try:
            session()  # the search_knowledge tool's model (exported on the first start of a machine)
        except Exception:
            logger.exception("knowledge embedding model preload failed; the first search will retry")
        gc.freeze()  # the models live as long as the process: out of the collector's sight (voiceagent/asgi.py)

    thread = threading.Thread(target=run, name="voice-preload", daemon=True)
    thread.start()
    return thread
