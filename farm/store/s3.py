"""The S3 store: `s3://BUCKET/PREFIX` on any S3-protocol server (AWS S3, MinIO, Ceph, R2, moto). Its
primitives (farm.store.base.Objects) are objects; what they hold is farm.store.domain's:

    PREFIX/images/ab/<sha256>.png           frames, named by the sha256 of their PNG bytes
    PREFIX/images/ab/<sha256>.json          sidecar (stores before 0.4; now in the batch result)
    PREFIX/inputs/ab/<sha256>               a job's travelling inputs (farm.run.inputs), PUT only if absent
    PREFIX/jobs/<job>.json                  job state (farm.run.jobs)
    PREFIX/jobs/<job>/index.json            trace key -> image digest
    PREFIX/jobs/<job>/log/<seq>-<h>.json    one object per job log record, listed in key order
    PREFIX/jobs/<job>/batches/<id>.json     each batch's result (merged by compare-and-swap)
    PREFIX/jobs/<job>/attempts/<id>/<what>-<token>-<pid>-<host>   one empty object per delivery event
    PREFIX/jobs/<job>/<name>                artefacts: comparison.json, heatmaps/, diff-<job>.json

The folder store's rules (farm.store.base), kept with what every S3-protocol server offers:

- Atomic writes: every object is one PutObject of the whole document (never a multipart upload),
  and S3 makes an object visible only when its upload completed, so an interrupted PUT or an
  unfinished multipart upload is never read, half or whole; the old object stays.
- Images: PUT only if absent (`If-None-Match: *`; a 412 means another writer stored the same bytes),
  one request and no HEAD first. A server that ignores the condition overwrites with the same bytes
  (the name is their digest), so nothing is lost; `swap`, which relies on it, is checked (below).
- Delivery counts: one object per event (`x-...` when a delivery begins, `e-...` when it ends), named
  by a random token, the pid and the host, counted by listing. Nothing is read, changed and written
  back, so two machines beginning the same batch at once both count (S3 lists are strongly
  consistent); `reset_batch` deletes them.
- Batch results: read with the object's ETag, merge (farm.store.base.merge_batch_results), PUT with
  `If-Match: ETag` (or `If-None-Match: *` for the first); a 412 means another worker wrote in
  between, so read and merge again. AWS S3 (since 2024), MinIO, Ceph RGW, R2 and moto honour both.
- The job log: one object per record, named by its sequence number and a digest of its bytes, so
  an append is whole or absent and writing the same record twice stores it once.

Endpoint, region and keys come from boto3's usual chain (AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3,
AWS_REGION / AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE, ~/.aws/config).
Transient failures (the endpoint unreachable, a connection cut, a 5xx, throttling) are retried here,
request by request, with botocore's standard backoff (min(random x 2^n, 20) s): AWS_MAX_ATTEMPTS
attempts when set, else MAX_ATTEMPTS (about a minute of backoff); then one StoreError sentence.
Not by botocore's own retry modes: their retry quota (500, 14 a retry) is one per client, and the
one client a process shares ran out of it within seconds of an outage, with 16 requests in flight
retrying, so requests then failed at their first attempt and frames were lost. boto3 is imported
here only, so a folder store does not need it (`pip install modelfarm[s3]`).

One boto3 client per process (and per endpoint and retry settings), made when first needed and
reused by every store opened in it (a client costs ~150 ms of CPU to make); boto3 clients are
thread-safe, so the domain layer's background writes and parallel reads (`PARALLEL` at once) share
it, with a connection pool as large: images (at most `domain.AHEAD` in flight) and the frames a worker records along
the way (farm.store.along). Only Content-MD5 checks a body (no CRC32 beside it, unless
AWS_REQUEST_CHECKSUM_CALCULATION asks).
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from farm.store.documents import StoreError
from farm.store.domain import Store

__all__ = ["MAX_ATTEMPTS", "PARALLEL", "S3Objects", "S3Store", "parse_s3_url"]

MAX_ATTEMPTS = 10  # attempts of a request (AWS_MAX_ATTEMPTS when set); backoff min(random * 2**n, 20) s between
TRANSIENT = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError", "ServiceUnavailable",
             "PriorRequestNotComplete"}  # error codes retried (and any 5xx but 501 Not Implemented)
PARALLEL = 16  # requests in flight at once per process (background image writes, parallel reads)
PRECONDITION = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
MISSING = {"NoSuchKey", "404", "NotFound"}
_CLIENTS: dict[tuple, object] = {}  # (pid, endpoint, retry settings) -> this process's client
_CLIENTS_LOCK = threading.Lock()
_CONDITIONAL: dict[str, bool] = {}  # bucket -> False once its server answered 501 to a conditional PUT


def parse_s3_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of ``s3://BUCKET[/PREFIX]``; the prefix has no leading or trailing slash."""
    if not url.startswith("s3://"):
        raise StoreError(f"{url!r} is not an s3:// URL (s3://BUCKET/PREFIX)")
    bucket, _, prefix = url[len("s3://"):].partition("/")
    prefix = prefix.strip("/")
    if not bucket or any(part in ("", ".", "..") for part in prefix.split("/") if prefix):
        raise StoreError(f"{url!r}: an S3 store is s3://BUCKET/PREFIX (a bucket name, then a prefix without"
                         f" empty, '.' or '..' parts)")
    return bucket, prefix


class S3Objects:
    """Keys as objects under a bucket prefix; implements farm.store.base.Objects."""

    kind = "s3"
    parallel = PARALLEL

    def __init__(self, url: str):
        self.bucket, self.prefix = parse_s3_url(url)
        _require_boto3()

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    @property
    def client(self):
        return _client()

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{self.key(key)}"

    def file(self, key: str) -> Path | None:
        return None

    def _call(self, op: str, **kw):
        """client.<op>(**kw) with the bucket; a missing key is FileNotFoundError, a failed precondition
        passes through as botocore's ClientError, anything else is one StoreError sentence."""
        from botocore.exceptions import BotoCoreError, ClientError

        attempts = _attempts()
        for attempt in range(1, attempts + 1):
            try:
                return getattr(self.client, op)(Bucket=self.bucket, **kw)
            except ClientError as e:
                code = str(e.response.get("Error", {}).get("Code", ""))
                if code in MISSING:
                    raise FileNotFoundError(f"s3://{self.bucket}/{kw.get('Key', '')}") from None
                if code in PRECONDITION or (code == "NotImplemented" and ("IfNoneMatch" in kw or "IfMatch" in kw)):
                    raise
                status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
                if attempt == attempts or not (code in TRANSIENT or (status >= 500 and status != 501)):
                    raise StoreError(_client_sentence(self, code, e)) from None
            except BotoCoreError as e:
                if attempt == attempts or not _transient(e):
                    raise StoreError(_unreachable_sentence(self, e)) from None
            time.sleep(min(random.random() * 2 ** (attempt - 1), 20))
        raise AssertionError("unreachable")

    def get_tagged(self, key: str) -> tuple[bytes, str]:
        """An object's bytes and ETag; a body cut off mid-read is fetched again (botocore retries the
        request, not the reading of its body)."""
        from botocore.exceptions import BotoCoreError

        for attempt in range(3):
            r = self._call("get_object", Key=self.key(key))
            try:
                return r["Body"].read(), r.get("ETag", "")
            except (BotoCoreError, OSError) as e:
                if attempt == 2:
                    raise StoreError(_unreachable_sentence(self, e)) from None
                time.sleep(0.5 * 2 ** attempt)
        raise AssertionError("unreachable")

    def get(self, key: str) -> bytes:
        return self.get_tagged(key)[0]

    def _put(self, key: str, data: bytes, **cond) -> str:
        """One PutObject of the whole document (never multipart): visible whole or not at all."""
        r = self._call("put_object", Key=self.key(key), Body=data, ContentLength=len(data), ContentMD5=_md5(data),
                       **cond)
        return r.get("ETag", "") or hashlib.md5(data).hexdigest()

    def put(self, key: str, data: bytes) -> None:
        self._put(key, data)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """One conditional PUT (If-None-Match: *); a server without conditional writes (501) gets a
        HEAD and a plain PUT instead (from then on, in this process): the names this is used for
        are their content, so a race between the two writes the same bytes twice."""
        from botocore.exceptions import ClientError

        if not _CONDITIONAL.get(self.bucket, True):
            if self.head(key) is not None:
                return False
            self._put(key, data)
            return True
        try:
            self._put(key, data, IfNoneMatch="*")
            return True
        except ClientError as e:  # 412: someone stored it first
            if str(e.response.get("Error", {}).get("Code", "")) != "NotImplemented":
                return False
        _CONDITIONAL[self.bucket] = False
        return self.put_if_absent(key, data)

    def swap(self, key: str, data: bytes, tag: str | None) -> str | None:
        """PUT with If-Match: ETag (If-None-Match: * for an object that is not there); a 412 (another
        writer first) or a missing object is None. A server without conditional writes cannot
        merge batch results safely: one StoreError sentence saying so."""
        from botocore.exceptions import ClientError

        try:
            return self._put(key, data, **({"IfMatch": tag} if tag else {"IfNoneMatch": "*"}))
        except FileNotFoundError:
            return None
        except ClientError as e:
            if str(e.response.get("Error", {}).get("Code", "")) == "NotImplemented":
                raise StoreError(f"{_endpoint(self)} does not support conditional writes (If-Match, If-None-Match),"
                                 f" which {self.location} needs to merge results safely") from None
            return None

    def list(self, prefix: str, deep: bool = True) -> list[str]:
        """Keys under `prefix`, relative to it, in key order (all pages)."""
        full = self.key(prefix)
        keys, token = [], None
        while True:
            kw = {"Prefix": full, **({} if deep else {"Delimiter": "/"}),
                  **({"ContinuationToken": token} if token else {})}
            r = self._call("list_objects_v2", **kw)
            keys += [o["Key"][len(full):] for o in r.get("Contents", ())]
            if not r.get("IsTruncated"):
                return sorted(keys)
            token = r["NextContinuationToken"]

    def delete(self, keys: Iterable[str]) -> None:
        full = [self.key(k) for k in keys]
        for i in range(0, len(full), 1000):  # DeleteObjects takes at most 1000 keys
            self._call("delete_objects", Delete={"Objects": [{"Key": k} for k in full[i:i + 1000]], "Quiet": True})

    def head(self, key: str) -> float | None:
        """When the object was last written (LastModified); None when it is not there."""
        try:
            modified = self._call("head_object", Key=self.key(key)).get("LastModified")
        except FileNotFoundError:
            return None
        return modified.timestamp() if modified is not None else time.time()


class S3Store(Store):
    """The store as S3 objects under a bucket prefix (see the module docstring)."""

    def __init__(self, url: str):
        super().__init__(S3Objects(url))

    @property
    def bucket(self) -> str:
        return self.objects.bucket

    @property
    def prefix(self) -> str:
        return self.objects.prefix

    @property
    def client(self):
        return self.objects.client


def _md5(data: bytes) -> str:
    """Content-MD5: the server refuses a body that arrived other than sent (a cut connection)."""
    import base64

    return base64.b64encode(hashlib.md5(data).digest()).decode("ascii")


def _require_boto3() -> None:
    try:
        import boto3  # noqa: F401 - only to say what is missing
    except ImportError:
        raise StoreError("an s3:// store needs boto3, which is not installed: pip install 'modelfarm[s3]'") from None


def _client():
    """This process's client for the endpoint and retry settings the environment names now: made
    once and reused (a forked worker makes its own; a changed AWS_ENDPOINT_URL, another)."""
    settings = (os.getpid(), *(os.environ.get(v) for v in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION",
                                                            "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID",
                                                            "AWS_MAX_ATTEMPTS")))
    client = _CLIENTS.get(settings)
    if client is None:
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(settings)
            if client is None:
                client = _CLIENTS[settings] = _make_client()
    return client


def _make_client():
    import boto3
    from botocore.config import Config

    retries = {"mode": "standard", "total_max_attempts": 1}  # S3Objects._call retries (the module docstring)
    # Content-MD5 (_md5) already guards every body: no second checksum (CRC32) unless the environment asks
    checksums = {f"{name}": os.environ.get(f"AWS_{name.upper()}") or "when_required"
                 for name in ("request_checksum_calculation", "response_checksum_validation")}
    return boto3.session.Session().client("s3", config=Config(retries=retries, connect_timeout=5, read_timeout=60,
                                                              max_pool_connections=PARALLEL, **checksums))


def _attempts() -> int:
    """Attempts of one request: AWS_MAX_ATTEMPTS when set (botocore's own variable), else MAX_ATTEMPTS."""
    value = os.environ.get("AWS_MAX_ATTEMPTS", "").strip()
    return max(1, int(value)) if value.isdigit() else MAX_ATTEMPTS


def _transient(e: Exception) -> bool:
    """A failure another attempt may not meet: no connection, a connection cut, a read timed out."""
    from botocore.exceptions import ConnectionError, HTTPClientError

    return isinstance(e, (ConnectionError, HTTPClientError))


def _endpoint(store: S3Objects) -> str:
    try:
        return store.client.meta.endpoint_url
    except Exception:  # noqa: BLE001 - only for a message
        return "the S3 endpoint"


def _unreachable_sentence(store: S3Objects, e: Exception) -> str:
    from botocore.exceptions import NoCredentialsError, NoRegionError

    if isinstance(e, NoCredentialsError):
        return (f"no credentials for {store.location}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE"
                f" or ~/.aws/credentials")
    if isinstance(e, NoRegionError):
        return f"no region for {store.location}: set AWS_REGION (or AWS_DEFAULT_REGION, ~/.aws/config)"
    return (f"the object store {_endpoint(store)} ({store.location}) did not answer after {_attempts()} attempts"
            f" ({e}); check AWS_ENDPOINT_URL and that the server is up")


def _client_sentence(store: S3Objects, code: str, e) -> str:
    msg = e.response.get("Error", {}).get("Message") or str(e)
    if code == "NoSuchBucket":
        return f"bucket {store.bucket!r} does not exist at {_endpoint(store)} ({store.location}); create it first"
    if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
        return (f"{_endpoint(store)} refused access to {store.location} ({code}: {msg}); check AWS_ACCESS_KEY_ID,"
                f" AWS_SECRET_ACCESS_KEY or AWS_PROFILE")
    return f"{_endpoint(store)} answered {code} for {store.location}: {msg}"
