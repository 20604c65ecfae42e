# One image for every production service: web (uvicorn, via manage.py serve), the Celery worker and beat.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

COPY . .
RUN pip install --no-cache-dir . \
 && SECRET_KEY=build-only python manage.py collectstatic --noinput --verbosity 0 \
 && useradd --system --uid 10001 app && mkdir -p /app/var /tmp/prometheus && chown -R app /app/var /tmp/prometheus

USER app
EXPOSE 8000 9100 9101
CMD ["python", "manage.py", "serve", "--host", "0.0.0.0", "--port", "8000", "--workers", "4", "--no-background"]
