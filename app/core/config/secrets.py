"""API keys for remote servers, kept in the OS keyring and never in the settings file.

`save_api_key`, `load_api_key`, `delete_api_key` are keyed by the server's origin (scheme://host:port), so a
key typed for one server is never sent to another. When no usable keyring backend exists (keyring's `fail`
backend, a locked or absent Secret Service on a headless Linux box), nothing is written anywhere:
`keyring_available()` says False and the caller must ask for the key each time (the CLI's --api-key, the
GUI's password field) and tell the user why.
"""

from __future__ import annotations

from urllib.parse import urlsplit

SERVICE = "roofline-remote"


class SecretStoreUnavailable(RuntimeError):
    """No working keyring backend: the key cannot be remembered; ask for it each time."""


def origin(url: str) -> str:
    """scheme://host:port of a URL: the keyring entry name for that server."""
    parts = urlsplit(url if "://" in url else f"https://{url}")
    scheme = (parts.scheme or "https").lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


def _backend():  # type: ignore[no-untyped-def]
    try:
        import keyring
        from keyring.backends import fail
    except Exception:  # noqa: BLE001 - keyring missing or broken: same as no backend
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:  # noqa: BLE001
        return None
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 1) <= 0:
        return None
    return backend


def keyring_available() -> bool:
    return _backend() is not None


def unavailable_reason() -> str:
    return ("No system keyring is available (keyring found no usable backend), so the API key is not stored: "
            "you will be asked for it each time. Install/unlock a Secret Service (GNOME Keyring, KWallet) "
            "to have it remembered.")


def save_api_key(url: str, key: str) -> None:
    backend = _backend()
    if backend is None:
        raise SecretStoreUnavailable(unavailable_reason())
    try:
        backend.set_password(SERVICE, origin(url), key)
    except Exception as exc:  # locked keyring, D-Bus errors ...
        raise SecretStoreUnavailable(f"The keyring refused to store the key: {exc}") from exc


def load_api_key(url: str) -> str | None:
    """The stored key for this server, or None (none stored, or no keyring)."""
    backend = _backend()
    if backend is None:
        return None
    try:
        value = backend.get_password(SERVICE, origin(url))
    except Exception:  # noqa: BLE001
        return None
    return str(value) if value else None


def delete_api_key(url: str) -> bool:
    """Forget the key for this server; True when one was removed."""
    backend = _backend()
    if backend is None:
        return False
    try:
        backend.delete_password(SERVICE, origin(url))
    except Exception:  # noqa: BLE001 - keyring raises PasswordDeleteError when there is none
        return False
    return True
