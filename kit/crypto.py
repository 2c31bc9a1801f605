"""Encryption at rest for secrets stored in the database (Fernet, from the `cryptography` package)."""

from __future__ import annotations

import base64
import json
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.db import models


@lru_cache(maxsize=1)
def _fernet() -> MultiFernet:
    keys = list(settings.FIELD_ENCRYPTION_KEYS)
    if not keys:
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"voiceagent-fields", info=b"fernet").derive(
            settings.SECRET_KEY.encode()
        )
        keys = [base64.urlsafe_b64encode(derived).decode()]
    return MultiFernet([Fernet(k) for k in keys])


def encrypt(plain: str) -> str:
    return _fernet().encrypt(plain.encode()).decode()


@lru_cache(maxsize=20000)
def decrypt(token: str) -> str:
    # Memoized: list views decrypt the same stored tokens on every request (a token is unique per
    # encryption, so a cache hit is always the right plaintext).
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:  # wrong key: never leak the ciphertext
        raise ValueError("stored secret cannot be decrypted with the configured keys") from exc


class EncryptedTextField(models.TextField):  # type: ignore[type-arg]  # Field[set, get] is generic only in the stubs
    """A text column whose value is stored Fernet-encrypted; Python code sees plain text."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        return None if value is None else decrypt(value)

    def get_prep_value(self, value: Any) -> str | None:
        value = super().get_prep_value(value)
        return None if value is None else encrypt(value)


class EncryptedJSONField(models.TextField):  # type: ignore[type-arg]  # Field[set, get] is generic only in the stubs
    """JSON stored Fernet-encrypted as text (for credential objects)."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(decrypt(value))

    def to_python(self, value: Any) -> Any:
        return value

    def get_prep_value(self, value: Any) -> str | None:
        return None if value is None else encrypt(json.dumps(value))
