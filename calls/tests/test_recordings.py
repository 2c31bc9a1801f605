"""Call recordings through the API: recordingUrl (signed, expiring), GET /calls/{id}/recording with Range,
DELETE, the retention purge, and S3-compatible storage against a local stand-in (moto's server).

The recording here is made by the encoder the engine uses (calls.recordings.encode_stereo_ogg) from two
known tracks and stored through the same path as a call's end (recording_store, call_recording_attach);
the recording of a real call through a real server is proven in realtime/tests/test_recording_e2e.py."""

from __future__ import annotations

import io
import re
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import av
import numpy as np
import pytest
from django.core.management import call_command
from django.utils import timezone

from calls import maintenance, services, tasks
from calls.models import Call
from calls.recordings import encode_stereo_ogg, recording_storage, recording_store
from kit.storage import storage_from_url
from testing.stores import LocalS3


@pytest.fixture
def storage_dir(settings: Any, tmp_path: Any) -> Any:
    settings.STORAGES = {
        **settings.STORAGES,
        "recordings": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "recordings")},
        },
    }
    return tmp_path / "recordings"


def tone(hz: float, seconds: float, rate: int, *, start: float = 0.0, total: float | None = None) -> bytes:
    """PCM16 of a tone from `start` for `seconds`, silent elsewhere up to `total`."""
    total = total if total is not None else start + seconds
    samples = np.zeros(int(total * rate), np.float64)
    t = np.arange(int(seconds * rate)) / rate
    samples[int(start * rate) : int(start * rate) + t.size] = np.sin(2 * np.pi * hz * t) * 8000
    return samples.astype("<i2").tobytes()


def recorded_call(agent: Any) -> Call:
    """A finished call with a 4-second recording: the caller (left) for the first 2 s, the agent (right) after."""
    call = services.call_start(agent=agent, channel="web")
    call = services.call_finish(call=call, status="completed")
    encoded = io.BytesIO()
    encode_stereo_ogg(
        left=io.BytesIO(tone(300, 2, 16000, total=4)),
        left_rate=16000,
        right=io.BytesIO(tone(500, 2, 24000, start=2, total=4)),
        right_rate=24000,
        out=encoded,
    )
    services.call_recording_attach(call_id=str(call.pk), key=recording_store(call=call, data=encoded))
    return Call.objects.get(pk=call.pk)


def decode(data: bytes) -> tuple[np.ndarray, int]:
    with av.open(io.BytesIO(data)) as container:
        rate = container.streams.audio[0].rate
        frames = [frame.to_ndarray() for frame in container.decode(audio=0)]
    return np.concatenate(frames, axis=1), rate


def channel_energy(audio: np.ndarray, rate: int, start: float, end: float) -> tuple[float, float]:
    part = audio[:, int(start * rate) : int(end * rate)]
    left, right = np.sqrt(np.mean(part**2, axis=1))
    return float(left), float(right)


def path_of(url: str) -> str:
    return url.split("://", 1)[-1].partition("/")[2].join(["/", ""])


def test_a_call_without_a_recording_has_a_null_recording_url_and_404s(owner, agent, storage_dir):
    call = services.call_finish(call=services.call_start(agent=agent, channel="web"), status="completed")
    assert owner.client.get(f"/public/v1/calls/{call.pk}").json()["recordingUrl"] is None
    response = owner.client.get(f"/public/v1/calls/{call.pk}/recording")
    assert response.status_code == 404 and response.json()["code"] == "RECORDING_NOT_FOUND"
    assert owner.client.delete(f"/public/v1/calls/{call.pk}/recording").status_code == 404


def test_the_recording_is_stereo_ogg_opus_with_the_caller_left_and_the_agent_right(owner, agent, storage_dir):
    call = recorded_call(agent)
    response = owner.client.get(f"/public/v1/calls/{call.pk}/recording")
    assert response.status_code == 200
    assert response["Content-Type"] == "audio/ogg" and response["Accept-Ranges"] == "bytes"
    data = b"".join(response.streaming_content)
    assert data[:4] == b"OggS" and int(response["Content-Length"]) == len(data)
    audio, rate = decode(data)
    assert audio.shape[0] == 2
    assert abs(audio.shape[1] / rate - 4) < 0.1
    left, right = channel_energy(audio, rate, 0.3, 1.7)
    assert left > 0.1 and right < 0.01
    left, right = channel_energy(audio, rate, 2.3, 3.7)
    assert right > 0.1 and left < 0.01
    assert list(storage_dir.rglob("*.ogg")) == [storage_dir / call.recording_key]


def test_the_signed_url_works_without_an_api_key_until_it_expires(
    owner, agent, storage_dir, settings, anonymous, monkeypatch
):
    settings.RECORDING_URL_TTL_SECONDS = 2
    call = recorded_call(agent)
    url = owner.client.get(f"/public/v1/calls/{call.pk}").json()["recordingUrl"]
    assert url.startswith("http://testserver/public/v1/recordings/")
    path = path_of(url)
    response = anonymous.get(path)
    assert response.status_code == 200 and b"".join(response.streaming_content)[:4] == b"OggS"

    tampered = path.replace("signature=", "signature=0")
    assert anonymous.get(tampered).json()["code"] == "RECORDING_LINK_INVALID"
    later = path.replace("expires=", "expires=9")  # the expiry is signed too
    assert anonymous.get(later).status_code == 403
    assert anonymous.get(path.split("?")[0]).status_code == 403
    assert anonymous.get(path.split("?")[0] + "?expires=\u00b2&signature=00").status_code == 403
    assert anonymous.get("/public/v1/recordings/not-a-uuid?expires=1&signature=00").status_code == 400

    # The clock the signature is checked against moves past the expiry (no wait on the wall clock).
    expires = int(re.search(r"expires=(\d+)", path).group(1))  # type: ignore[union-attr]
    monkeypatch.setattr("calls.recordings.time", SimpleNamespace(time=lambda: expires + 1.0))
    expired = anonymous.get(path)
    assert expired.status_code == 403
    assert expired.json() == {
        "error": "This recording link has expired or is not valid",
        "code": "RECORDING_LINK_INVALID",
    }


def test_range_requests_get_206_with_the_bytes_asked_for_and_416_when_not_satisfiable(owner, agent, storage_dir):
    call = recorded_call(agent)
    url = f"/public/v1/calls/{call.pk}/recording"
    whole = b"".join(owner.client.get(url).streaming_content)
    size = len(whole)
    for header, start, end in (
        ("bytes=0-99", 0, 99),
        ("bytes=100-", 100, size - 1),
        ("bytes=-50", size - 50, size - 1),
        (f"bytes=10-{size + 500}", 10, size - 1),
    ):
        response = owner.client.get(url, HTTP_RANGE=header)
        assert response.status_code == 206, header
        assert response["Content-Range"] == f"bytes {start}-{end}/{size}"
        body = b"".join(response.streaming_content)
        assert body == whole[start : end + 1] and int(response["Content-Length"]) == len(body)
    for bad in (f"bytes={size}-", "bytes=5-2", "bytes=0-1,5-9", "items=0-5", "bytes=-0", "bytes=abc", "bytes=\u00b2-"):
        response = owner.client.get(url, HTTP_RANGE=bad)
        assert response.status_code == 416, bad
        assert response["Content-Range"] == f"bytes */{size}"
        assert response.json()["code"] == "RANGE_NOT_SATISFIABLE"


def test_delete_removes_the_file_and_the_url(owner, agent, storage_dir, outsider):
    call = recorded_call(agent)
    assert outsider.client.delete(f"/public/v1/calls/{call.pk}/recording").status_code == 404
    response = owner.client.delete(f"/public/v1/calls/{call.pk}/recording")
    assert response.status_code == 204
    assert not list(storage_dir.rglob("*.ogg"))
    detail = owner.client.get(f"/public/v1/calls/{call.pk}").json()
    assert detail["recordingUrl"] is None and detail["status"] == "completed"
    assert owner.client.get(f"/public/v1/calls/{call.pk}/recording").status_code == 404
    assert owner.client.delete(f"/public/v1/calls/{call.pk}/recording").status_code == 404


def test_a_recording_gone_from_the_storage_is_a_404_not_a_500(owner, agent, storage_dir):
    call = recorded_call(agent)
    (storage_dir / call.recording_key).unlink()  # removed behind the service's back
    response = owner.client.get(f"/public/v1/calls/{call.pk}/recording")
    assert response.status_code == 404 and response.json()["code"] == "RECORDING_NOT_FOUND"


def test_a_deleted_call_takes_its_recording_with_it(owner, agent, storage_dir, django_capture_on_commit_callbacks):
    call = recorded_call(agent)
    assert list(storage_dir.rglob("*.ogg"))
    with django_capture_on_commit_callbacks(execute=True):
        owner.organization.delete()  # its calls go with it
    assert not list(storage_dir.rglob("*.ogg"))
    assert not Call.objects.filter(pk=call.pk).exists()


def test_the_retention_purge_deletes_old_recordings_in_the_upkeep_sweep_and_the_celery_task(
    owner, agent, storage_dir, settings
):
    settings.RECORDING_RETENTION_DAYS = 30
    old, recent, older = recorded_call(agent), recorded_call(agent), recorded_call(agent)
    Call.objects.filter(pk=old.pk).update(recording_saved_at=timezone.now() - timedelta(days=31))
    Call.objects.filter(pk=older.pk).update(recording_saved_at=timezone.now() - timedelta(days=90))
    assert maintenance.run_maintenance()["purgedRecordings"] == 2
    assert owner.client.get(f"/public/v1/calls/{old.pk}").json()["recordingUrl"] is None
    assert owner.client.get(f"/public/v1/calls/{recent.pk}").json()["recordingUrl"] is not None
    assert [p.name for p in storage_dir.rglob("*.ogg")] == [f"{recent.pk}.ogg"]
    Call.objects.filter(pk=recent.pk).update(recording_saved_at=timezone.now() - timedelta(days=40))
    assert tasks.purge_recordings.delay().get() == 1
    assert not list(storage_dir.rglob("*.ogg"))
    settings.RECORDING_RETENTION_DAYS = 0  # kept until deleted
    kept = recorded_call(agent)
    Call.objects.filter(pk=kept.pk).update(recording_saved_at=timezone.now() - timedelta(days=4000))
    call_command("calls_maintenance")
    assert Call.objects.get(pk=kept.pk).recording_key


def test_s3_compatible_storage_against_a_local_stand_in(owner, agent, settings, anonymous):
    with LocalS3() as s3:
        # As the settings module reads RECORDINGS_STORAGE_URL and its keys from the environment.
        entry = storage_from_url(
            s3.storage_url, default_location="unused", access_key=s3.ACCESS_KEY, secret_key=s3.SECRET_KEY
        )
        settings.STORAGES = {**settings.STORAGES, "recordings": entry}
        assert type(recording_storage()).__name__ == "S3Storage"
        call = recorded_call(agent)
        assert s3.keys() == [f"calls/{call.recording_key}"]
        stored = s3.client().get_object(Bucket=s3.bucket, Key=f"calls/{call.recording_key}")["Body"].read()

        response = owner.client.get(f"/public/v1/calls/{call.pk}/recording", HTTP_RANGE="bytes=4-")
        assert response.status_code == 206 and b"".join(response.streaming_content) == stored[4:]
        url = owner.client.get(f"/public/v1/calls/{call.pk}").json()["recordingUrl"]
        audio, rate = decode(b"".join(anonymous.get(path_of(url)).streaming_content))
        assert audio.shape[0] == 2 and channel_energy(audio, rate, 0.3, 1.7)[0] > 0.1

        assert owner.client.delete(f"/public/v1/calls/{call.pk}/recording").status_code == 204
        assert s3.keys() == []


# --- the dashboard's call page -------------------------------------------------------------------


@pytest.fixture
def staff(client: Any, db: Any) -> Any:
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_the_call_page_plays_the_recording_and_each_turn_seeks_to_its_start(staff, agent, storage_dir):
    call = services.call_start(agent=agent, channel="web")
    services.call_message_add(call=call, role="assistant", content="Hello, how can I help?")
    services.call_message_add(call=call, role="user", content="Book a table please.")
    services.call_finish(call=call, status="completed")
    encoded = io.BytesIO()
    encode_stereo_ogg(
        left=io.BytesIO(tone(300, 1, 16000)), left_rate=16000, right=io.BytesIO(b""), right_rate=24000, out=encoded
    )
    services.call_recording_attach(call_id=str(call.pk), key=recording_store(call=call, data=encoded))

    response = staff.get(f"/admin/calls/call/{call.pk}/change/")
    page = response.content.decode()
    assert "media-src 'self'" in response["Content-Security-Policy"]
    source = re.search(r'<audio id="call-recording" controls preload="metadata" src="([^"]+)"', page)
    assert source, page
    audio = staff.get(source.group(1).replace("&amp;", "&"))
    assert audio.status_code == 200 and b"".join(audio.streaming_content)[:4] == b"OggS"
    # Both transcript bubbles and both timeline bars carry where their turn starts; the script seeks there.
    assert len(re.findall(r'class="bubble (?:caller|agent)" data-seek="\d+\.\d\d"', page)) == 2
    assert len(re.findall(r'<rect class="turn (?:caller|agent)" data-turn="\d" data-seek="\d+\.\d\d"', page)) == 2
    assert 'player.currentTime = Math.max(0, parseFloat(target.getAttribute("data-seek"))' in page


def test_the_call_page_says_when_there_is_no_recording_and_hides_it_without_the_transcript_permission(
    staff, agent, storage_dir, client
):
    from django.contrib.auth.models import Permission, User

    plain = services.call_finish(call=services.call_start(agent=agent, channel="web"), status="completed")
    page = staff.get(f"/admin/calls/call/{plain.pk}/change/").content.decode()
    assert "<audio" not in page and "No recording" in page and 'data-seek="' not in page.split("conversation")[-1]
    recorded = recorded_call(agent)
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_call"))
    client.force_login(viewer)
    page = client.get(f"/admin/calls/call/{recorded.pk}/change/").content.decode()
    assert "<audio" not in page and "/public/v1/recordings/" not in page


def test_a_recordings_storage_url_must_be_a_folder_or_an_s3_bucket():
    from django.core.exceptions import ImproperlyConfigured

    assert storage_from_url("", default_location="/x")["OPTIONS"] == {"location": "/x"}
    assert storage_from_url("file:///srv/rec", default_location="/x")["OPTIONS"] == {"location": "/srv/rec"}
    s3 = storage_from_url(
        "s3://bucket/a/b?region_name=eu-west-1", default_location="/x", access_key="k", secret_key="s"
    )
    assert s3["BACKEND"] == "storages.backends.s3.S3Storage"
    assert {k: s3["OPTIONS"][k] for k in ("bucket_name", "location", "region_name", "access_key")} == {
        "bucket_name": "bucket",
        "location": "a/b",
        "region_name": "eu-west-1",
        "access_key": "k",
    }
    for bad in ("ftp://host/x", "s3:///nobucket", "s3://bucket?colour=blue"):
        with pytest.raises(ImproperlyConfigured):
            storage_from_url(bad, default_location="/x")
