"""Names AWS and replmon accept, checked in one place: each check returns the value or raises
:class:`ValueError` whose message gives the accepted form (the route model and the CLI use them).

One pattern (:data:`NAME_RE`, docs/SEMANTICS.md "Names") for every name replmon turns into a key,
a metric dimension or a file name: routes, mount targets, presets and run names. It is checked once,
at the edge (a flag, a request, a target list); and every path built from a name is checked again to
stay under its root (:func:`contained`), so a name that slipped past the edge still cannot write
outside the spool, the lab directory or a chart's folder.

>>> check_bucket("dr-source-bucket")
'dr-source-bucket'
>>> check_name("..")
Traceback (most recent call last):
...
ValueError: must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (no '/', '..' or NUL), e.g. 'use1-to-usw2'
>>> check_endpoint_url("127.0.0.1:9000")
Traceback (most recent call last):
...
ValueError: must be an http(s) URL with no path, e.g. 'http://127.0.0.1:9000'
"""

from __future__ import annotations

import re
from pathlib import Path

BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](--[a-z0-9-]+--x-s3)?$")
REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
#: Route, target, preset and run names: never '.', '..', '/', NUL, '#' (which separates a route from its
#: signal partitions) or a leading '-' (a flag); at most 64 characters.
NAME_RE = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
NAME_FORM = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (no '/', '..' or NUL)"
ROUTE_NAME_RE = NAME_RE
ENDPOINT_URL_RE = re.compile(r"^https?://[^/\s]+/?$")
ACCOUNT_RE = re.compile(r"^\d{12}$")
ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$")


def check_bucket(value: str) -> str:
    if not isinstance(value, str) or not BUCKET_RE.fullmatch(value) or ".." in value:
        raise ValueError("must be an S3 bucket name: 3-63 lowercase letters, digits, dots or hyphens, e.g. 'dr-source-bucket'")
    return value


def check_region(value: str | None) -> str | None:
    if value is not None and not REGION_RE.fullmatch(value):
        raise ValueError("must be an AWS region code such as 'us-east-1' or 'ap-southeast-1'")
    return value


def check_name(value: object, example: str = "use1-to-usw2") -> str:
    """A route, target, preset or run name (:data:`NAME_RE`)."""
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise ValueError(f"must be {NAME_FORM}, e.g. {example!r}")
    return value


def check_route_name(value: str) -> str:
    return check_name(value)


class PathEscape(ValueError):
    """A path built from a name would leave its root (or holds a NUL): refused, never written."""


def contained(root: Path | str, *parts: str) -> Path:
    """``root / parts``, refused (:class:`PathEscape`) unless it stays under ``root`` once '..' and
    symbolic links are resolved. Defence in depth behind the name checks at the edge.

    >>> contained("/var/spool/replmon", "primary", "x.json").as_posix()
    '/var/spool/replmon/primary/x.json'
    >>> contained("/var/spool/replmon", "..", "etc")
    Traceback (most recent call last):
    ...
    replmon.core.names.PathEscape: '../etc' would leave /var/spool/replmon; names are 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (no '/', '..' or NUL)
    """
    joined = "/".join(parts)
    if "\x00" in joined or not parts or any(p in ("", ".", "..") or "/" in p for p in parts):
        base = Path(root).resolve()
        raise PathEscape(f"{joined!r} would leave {base}; names are {NAME_FORM}")
    base = Path(root).resolve()
    path = base.joinpath(*parts).resolve()
    if base not in path.parents:
        raise PathEscape(f"{joined!r} would leave {base} (a symbolic link points elsewhere)")
    return path


def check_prefix(value: str) -> str:
    if not value or value.startswith("/") or not value.endswith("/"):
        raise ValueError("must be a key prefix ending in '/', without a leading '/', e.g. 'replmon-probes/'")
    return value


def check_endpoint_url(value: str | None) -> str | None:
    if value is not None and not ENDPOINT_URL_RE.fullmatch(value):
        raise ValueError("must be an http(s) URL with no path, e.g. 'http://127.0.0.1:9000'")
    return value


def check_account(value: str | None) -> str | None:
    if value is not None and not ACCOUNT_RE.fullmatch(value):
        raise ValueError("must be a 12-digit AWS account id")
    return value


#: A full KMS key ARN: what S3's key-id header and bucket policies compare (an alias or a bare key id is not).
KMS_KEY_ARN_RE = r"^arn:aws[a-z-]*:kms:[a-z]{2}(-[a-z]+)+-\d:\d{12}:key/[A-Za-z0-9-]+$"


def check_kms_key_arn(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(KMS_KEY_ARN_RE, value):
        raise ValueError("must be a full KMS key ARN, e.g. 'arn:aws:kms:ap-northeast-1:111122223333:key/1234abcd-12ab-34cd-56ef-"
                         "1234567890ab', not an alias or a key id: S3's key header and bucket policies compare the key ARN "
                         "(`aws kms describe-key --key-id <alias> --query KeyMetadata.Arn` prints it)")
    return value


def check_role_arn(value: str | None) -> str | None:
    if value is not None and not ROLE_ARN_RE.fullmatch(value):
        raise ValueError("must be an IAM role ARN, e.g. 'arn:aws:iam::123456789012:role/replmon-reader'")
    return value
