# Production image: Daphne serving HTTP and WebSockets. Build: docker build -t voiceagent .
# Run migrations as a release step: docker run --env-file prod.env voiceagent python manage.py migrate
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    KNOWLEDGE_MODEL_CACHE=/app/var/models \
    DJANGO_SETTINGS_MODULE=voiceagent.settings

WORKDIR /app

# torch from the CPU wheel index first, so that nothing pulls the multi-GB CUDA build.
COPY requirements.txt .
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
 && pip install -r requirements.txt

COPY . .
RUN useradd --create-home --uid 10001 app \
 && mkdir -p var/media staticfiles \
 && SECRET_KEY=build-only-collectstatic python manage.py collectstatic --noinput \
 && SECRET_KEY=build-only python -c "import django; django.setup(); from knowledge.embeddings import session; session()" \
 && chown -R app:app var staticfiles

USER app
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD python -c "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"
CMD ["python", "-m", "voiceagent.server", "-b", "0.0.0.0", "-p", "8000", "voiceagent.asgi:application"]
