"""The S3 store: `s3://BUCKET/PREFIX` on any S3-protocol server (AWS S3, MinIO, Ceph, R2, moto).

    PREFIX/images/ab/<sha256>.png           frames, named by the sha256 of their PNG bytes
    PREFIX/images/ab/<sha256>.json          sidecar (written before its image: an image has one)
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
- Images: PUT only if absent (`If-None-Match: *`; a 412 means another writer stored the same bytes).
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
Transient failures (the endpoint unreachable, a 5xx, throttling) are retried by botocore's
"standard" retry mode with exponential backoff: AWS_MAX_ATTEMPTS / AWS_RETRY_MODE when set, else
MAX_ATTEMPTS attempts (about a minute of backoff); then one StoreError sentence. boto3 is imported
here only, so a folder store does not need it (`pip install modelfarm[s3]`).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import posixpath
import random
import secrets
import shutil
import socket
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, unquote

from farm.files import atomic_write, json_bytes
from farm.store.base import checked_input, delivery_owner, input_ref, merge_batch_results, open_deliveries
from farm.store.documents import StoreError, check_batch_result, check_job, read_document

__all__ = ["MAX_ATTEMPTS", "S3Store", "TreeMirror", "parse_s3_url"]

MAX_ATTEMPTS = 10  # botocore standard mode: backoff min(random * 2**n, 20) s between attempts
LOG_READERS = 16  # parallel GETs reading a job's log (one object per record)
CAS_ATTEMPTS = 100  # rounds of read-merge-write a batch result gets against concurrent writers
PRECONDITION = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
MISSING = {"NoSuchKey", "404", "NotFound"}


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


class _Object:
    """An object as farm.store.documents.read_document reads a file: its bytes, and its URL as its name."""

    def __init__(self, store: S3Store, key: str):
        self.store, self.key = store, key
        self.etag: str | None = None

    def read_bytes(self) -> bytes:
        data, self.etag = self.store._get(self.key)
        return data

    def __str__(self) -> str:
        return f"s3://{self.store.bucket}/{self.key}"


class S3Store:
    """The store as S3 objects under a bucket prefix (see the module docstring); implements
    farm.store.base.Store."""

    kind = "s3"

    def __init__(self, url: str):
        self.bucket, self.prefix = parse_s3_url(url)
        _require_boto3()
        self._client = None
        self._pid = None
        self._cache: Path | None = None

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def __repr__(self) -> str:
        return f"S3Store({self.location!r})"

    # --- the client and its errors
    @property
    def client(self):
        if self._client is None or self._pid != os.getpid():  # a forked worker makes its own
            self._client, self._pid = _make_client(), os.getpid()
        return self._client

    def _call(self, op: str, **kw):
        """client.<op>(**kw) with the bucket; a missing key is FileNotFoundError, a failed precondition
        passes through as botocore's ClientError, anything else is one StoreError sentence."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self.client, op)(Bucket=self.bucket, **kw)
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in MISSING:
                raise FileNotFoundError(f"s3://{self.bucket}/{kw.get('Key', '')}") from None
            if code in PRECONDITION:
                raise
            raise StoreError(_client_sentence(self, code, e)) from None
        except BotoCoreError as e:
            raise StoreError(_unreachable_sentence(self, e)) from None

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _get(self, key: str) -> tuple[bytes, str]:
        """An object's bytes and ETag; a body cut off mid-read is fetched again (botocore retries the
        request, not the reading of its body)."""
        from botocore.exceptions import BotoCoreError

        for attempt in range(3):
            r = self._call("get_object", Key=key)
            try:
                return r["Body"].read(), r.get("ETag", "")
            except (BotoCoreError, OSError) as e:
                if attempt == 2:
                    raise StoreError(_unreachable_sentence(self, e)) from None
                time.sleep(0.5 * 2 ** attempt)
        raise AssertionError("unreachable")

    def _read(self, rel: str) -> bytes:
        return self._get(self.key(rel))[0]

    def _put(self, rel: str, data: bytes, **cond) -> None:
        """One PutObject of the whole document (never multipart): visible whole or not at all."""
        self._call("put_object", Key=self.key(rel), Body=data, ContentLength=len(data),
                   ContentMD5=_md5(data), **cond)

    def _exists(self, rel: str) -> bool:
        try:
            self._call("head_object", Key=self.key(rel))
            return True
        except FileNotFoundError:
            return False

    def _list(self, rel_prefix: str, delimiter: str | None = None) -> list[str]:
        """Keys under `rel_prefix`, relative to it, in key order (all pages)."""
        full = self.key(rel_prefix)
        keys, token = [], None
        while True:
            kw = {"Prefix": full, **({"Delimiter": delimiter} if delimiter else {}),
                  **({"ContinuationToken": token} if token else {})}
            r = self._call("list_objects_v2", **kw)
            keys += [o["Key"][len(full):] for o in r.get("Contents", ())]
            if not r.get("IsTruncated"):
                return sorted(keys)
            token = r["NextContinuationToken"]

    def _delete_under(self, rel_prefix: str) -> None:
        self._delete([rel_prefix + k for k in self._list(rel_prefix)])

    def _delete(self, rels: list[str]) -> None:
        keys = [self.key(rel) for rel in rels]
        for i in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            self._call("delete_objects", Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})

    # --- layout (store-relative, as the folder store's)
    def image_ref(self, digest: str) -> str:
        return f"images/{digest[:2]}/{digest}.png"

    def _sidecar_rel(self, digest: str) -> str:
        return f"images/{digest[:2]}/{digest}.json"

    # --- images
    def put_image(self, png: bytes, meta: dict) -> str:
        """Store PNG bytes and their sidecar; returns the digest (sha256 hex of the bytes). The sidecar
        goes first, so an image that is there has its sidecar; the image is PUT only if absent."""
        digest = hashlib.sha256(png).hexdigest()
        data = json_bytes({"digest": digest, "bytes": len(png), **meta})
        there = self._exists(self.image_ref(digest))
        if there:
            try:
                there = self._read(self._sidecar_rel(digest)) == data
            except FileNotFoundError:
                there = False
        if not there:  # a new image (3 requests) or a sidecar that changed; else 2 reads, no write
            self._put(self._sidecar_rel(digest), data)
            self._put_if_absent(self.image_ref(digest), png)
        return digest

    def _put_if_absent(self, rel: str, data: bytes) -> None:
        from botocore.exceptions import ClientError

        try:
            self._put(rel, data, IfNoneMatch="*")
        except ClientError:  # 412: someone stored it first; the name is its content, so it is these bytes
            pass

    def read_image(self, digest: str) -> bytes:
        return self._read(self.image_ref(digest))

    # --- inputs: content-addressed, PUT only when absent (a HEAD first: most are there on a second night)
    def put_input(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        if not self._exists(input_ref(digest)):
            self._put_if_absent(input_ref(digest), data)
        return digest

    def read_input(self, digest: str) -> bytes:
        return checked_input(self.location, digest, self._read(input_ref(digest)))

    def read_sidecar(self, digest: str) -> dict:
        return json.loads(self._read(self._sidecar_rel(digest)))

    # --- batches: delivery events, one object each
    def _attempts_rel(self, job_id: str, batch_id: str) -> str:
        return f"jobs/{job_id}/attempts/{batch_id}/"

    def begin_batch(self, job_id: str, batch_id: str) -> int:
        """Count a delivery of a batch by this process; returns which one this is (1 for the first)."""
        self._event(job_id, batch_id, "x")
        return self.deliveries(job_id, batch_id)

    def end_batch(self, job_id: str, batch_id: str) -> None:
        self._event(job_id, batch_id, "e")

    def _event(self, job_id: str, batch_id: str, what: str) -> None:
        host, pid = delivery_owner()
        name = f"{what}-{secrets.token_hex(8)}-{pid}-{quote(host, safe='')}"
        self._put(self._attempts_rel(job_id, batch_id) + name, b"")

    def _events(self, job_id: str, batch_id: str) -> list[tuple[str, str, int]]:
        out = []
        for name in self._list(self._attempts_rel(job_id, batch_id)):
            what, _, rest = name.partition("-")
            _token, _, rest = rest.partition("-")
            pid, _, host = rest.partition("-")
            out.append((what, unquote(host), int(pid) if pid.isdigit() else 0))
        return out

    def deliveries(self, job_id: str, batch_id: str) -> int:
        return sum(what == "x" for what, _, _ in self._events(job_id, batch_id))

    def unfinished(self, job_id: str, batch_id: str) -> list[tuple[str, int]]:
        """Deliveries that began and did not end, as (host, pid) (base.open_deliveries)."""
        return open_deliveries((what, (host, pid)) for what, host, pid in self._events(job_id, batch_id))

    def reset_batch(self, job_id: str, batch_id: str) -> None:
        self._delete_under(self._attempts_rel(job_id, batch_id))

    # --- batch results: compare-and-swap on the object's ETag
    def _batch_rel(self, job_id: str, batch_id: str) -> str:
        return f"jobs/{job_id}/batches/{batch_id}.json"

    def write_batch_result(self, job_id: str, result: dict) -> dict:
        """Merge `result` into the stored one (base.merge_batch_results) and write it if the stored one
        is still the one read (If-Match); another writer in between: read and merge again."""
        from botocore.exceptions import ClientError

        rel = self._batch_rel(job_id, result["batch"])
        for attempt in range(CAS_ATTEMPTS):
            obj = _Object(self, self.key(rel))
            try:
                old = read_document(obj, check_batch_result)
            except FileNotFoundError:
                old = None
            except (ValueError, RuntimeError):  # not a batch result (damaged): replaced
                old = None
            merged = merge_batch_results(old, result)
            cond = {"IfMatch": obj.etag} if obj.etag else {"IfNoneMatch": "*"}
            try:
                self._put(rel, json_bytes(merged), **cond)
                return merged
            except (ClientError, FileNotFoundError):  # changed or removed since it was read
                time.sleep(random.uniform(0, min(1.0, 0.02 * 2 ** attempt)))
        raise StoreError(f"{self.location}: batch result {rel} kept changing under {CAS_ATTEMPTS} attempts to merge"
                         f" into it; too many workers write this batch at once")

    def read_batch_result(self, job_id: str, batch_id: str) -> dict | None:
        try:
            return read_document(_Object(self, self.key(self._batch_rel(job_id, batch_id))), check_batch_result)
        except FileNotFoundError:
            return None

    def remove_batch_result(self, job_id: str, batch_id: str) -> None:
        self._call("delete_object", Key=self.key(self._batch_rel(job_id, batch_id)))

    # --- jobs
    def write_job(self, job_id: str, state: dict) -> None:
        self._put(f"jobs/{job_id}.json", json_bytes(state))

    def read_job(self, job_id: str) -> dict:
        return read_document(_Object(self, self.key(f"jobs/{job_id}.json")), check_job)

    def append_job_log(self, job_id: str, record: dict) -> None:
        data = json_bytes(record)
        seq = record.get("seq")
        name = f"{seq:012d}" if isinstance(seq, int) and seq >= 0 else "zzzzzzzzzzzz"
        self._put(f"jobs/{job_id}/log/{name}-{hashlib.sha256(data).hexdigest()[:16]}.json", data)

    def read_job_log(self, job_id: str, after: int = 0) -> list[dict]:
        """The log's records in order, but for those numbered `after` or below (their names say so: no
        GET for a record the job document already holds); one that is not a JSON object raises
        ValueError naming it."""
        names = [n for n in self._list(f"jobs/{job_id}/log/") if not (n[:12].isdigit() and int(n[:12]) <= after)]

        def fetch(name: str) -> bytes | None:
            try:
                return self._read(f"jobs/{job_id}/log/{name}")
            except FileNotFoundError:
                return None  # removed since the listing

        with ThreadPoolExecutor(LOG_READERS) as pool:  # a GET per record: in parallel, kept in order
            raws = list(pool.map(fetch, names))
        out = []
        for name, raw in zip(names, raws, strict=True):
            if raw is None:
                continue
            url = f"{self.location}/jobs/{job_id}/log/{name}"
            try:
                rec = json.loads(raw)
            except ValueError as e:
                raise ValueError(f"{url}: not valid JSON ({e})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{url}: expected a JSON object, got {type(rec).__name__}")
            out.append(rec)
        return out

    def write_index(self, job_id: str, index: dict) -> None:
        self._put(f"jobs/{job_id}/index.json", json_bytes(dict(sorted(index.items()))))

    def read_index(self, job_id: str) -> dict:
        try:
            return json.loads(self._read(f"jobs/{job_id}/index.json"))
        except FileNotFoundError:
            return {}

    def job_ids(self) -> list[str]:
        return sorted(k[:-5] for k in self._list("jobs/", delimiter="/") if k.endswith(".json"))

    def has_job(self, job_id: str) -> bool:
        return self._exists(f"jobs/{job_id}.json")

    def job_location(self, job_id: str) -> str:
        return f"{self.location}/jobs/{job_id}.json"

    def job_time(self, job_id: str) -> float | None:
        """When the job's document was last written (its object's LastModified); None when it is not there."""
        try:
            modified = self._call("head_object", Key=self.key(f"jobs/{job_id}.json")).get("LastModified")
        except FileNotFoundError:
            return None
        return modified.timestamp() if modified is not None else None

    def remove_job(self, job_id: str) -> None:
        """Forget a job: its document and everything under jobs/<job>/ (images stay: they are shared)."""
        self._call("delete_object", Key=self.key(f"jobs/{job_id}.json"))
        self._delete_under(f"jobs/{job_id}/")

    # --- artefacts
    def put_artefact(self, job_id: str, name: str, data: bytes) -> str:
        rel = self._artefact_rel(job_id, name)
        self._put(rel, data)
        return rel

    def read_artefact(self, job_id: str, name: str) -> bytes | None:
        try:
            return self._read(self._artefact_rel(job_id, name))
        except FileNotFoundError:
            return None

    def _artefact_rel(self, job_id: str, name: str) -> str:
        norm = posixpath.normpath(name)
        if name.startswith("/") or norm == "." or norm.split("/")[0] == "..":
            raise ValueError(f"artefact name {name!r} leaves the job's folder")
        return f"jobs/{job_id}/{norm}"

    def local_path(self, ref: str) -> Path | None:
        """A local copy of the object behind a reference (put_artefact's or image_ref's), for whoever
        copies files (reports); None when there is no such object. Copies live in a temporary folder
        removed when the process exits."""
        norm = posixpath.normpath(ref)
        if ref.startswith("/") or norm.split("/")[0] in ("..", "."):
            return None
        try:
            data = self._read(norm)
        except FileNotFoundError:
            return None
        if self._cache is None:
            self._cache = Path(tempfile.mkdtemp(prefix="farm-s3-"))
            atexit.register(shutil.rmtree, self._cache, True)
        path = self._cache / norm
        atomic_write(path, data, self._cache)
        return path


class TreeMirror:
    """A folder's files as objects under the store's prefix, for outputs that are written as a folder
    (farm thumbnails): `pull` copies them into a local folder, the command writes there, `push` puts
    back what changed (`last` after the rest, so an index never names a file not yet there) and
    deletes what the folder no longer has. `hold` takes a lock object (If-None-Match: *), so two
    commands never write one prefix at once; `release` drops it."""

    LOCK = ".farm/lock"

    def __init__(self, store: S3Store):
        self.store = store
        self.known: dict[str, str] = {}  # relative path -> ETag, as pulled

    def hold(self) -> None:
        from botocore.exceptions import ClientError

        try:
            self.store._put(self.LOCK, f"{socket.gethostname()} {os.getpid()} {time.time():.0f}\n".encode(),
                            IfNoneMatch="*")
        except ClientError:
            raise StoreError(f"another command is writing {self.store.location} (it holds"
                             f" {self.store.location}/{self.LOCK}); wait for it, or delete that object if none"
                             f" runs") from None

    def release(self) -> None:
        self.store._call("delete_object", Key=self.store.key(self.LOCK))

    def pull(self, dest: Path, skip) -> None:
        for rel in self.store._list(""):
            if skip(rel):
                continue
            data, etag = self.store._get(self.store.key(rel))
            atomic_write(dest / rel, data, dest / ".farm" / "tmp")
            self.known[rel] = etag.strip('"')

    def push(self, src: Path, skip, last: tuple[str, ...]) -> None:
        files = sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
        files = [f for f in files if not skip(f)]
        for rel in sorted(files, key=lambda f: (f in last, last.index(f) if f in last else 0, f)):
            data = (src / rel).read_bytes()
            if self.known.get(rel) != hashlib.md5(data).hexdigest():
                self.store._put(rel, data)
        self.store._delete(sorted(set(self.known) - set(files)))


def _md5(data: bytes) -> str:
    """Content-MD5: the server refuses a body that arrived other than sent (a cut connection)."""
    import base64

    return base64.b64encode(hashlib.md5(data).digest()).decode("ascii")


def _require_boto3() -> None:
    try:
        import boto3  # noqa: F401 - only to say what is missing
    except ImportError:
        raise StoreError("an s3:// store needs boto3, which is not installed: pip install 'modelfarm[s3]'") from None


def _make_client():
    import boto3
    import botocore.session
    from botocore.config import Config

    chain = botocore.session.get_session()
    retries = {"mode": chain.get_config_variable("retry_mode") or "standard",
               "total_max_attempts": chain.get_config_variable("max_attempts") or MAX_ATTEMPTS}
    return boto3.session.Session().client("s3", config=Config(retries=retries, connect_timeout=5, read_timeout=60))


def _endpoint(store: S3Store) -> str:
    try:
        return store.client.meta.endpoint_url
    except Exception:  # noqa: BLE001 - only for a message
        return "the S3 endpoint"


def _unreachable_sentence(store: S3Store, e: Exception) -> str:
    from botocore.exceptions import NoCredentialsError, NoRegionError

    if isinstance(e, NoCredentialsError):
        return (f"no credentials for {store.location}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE"
                f" or ~/.aws/credentials")
    if isinstance(e, NoRegionError):
        return f"no region for {store.location}: set AWS_REGION (or AWS_DEFAULT_REGION, ~/.aws/config)"
    attempts = store.client.meta.config.retries.get("total_max_attempts") or MAX_ATTEMPTS
    return (f"the object store {_endpoint(store)} ({store.location}) did not answer after {attempts} attempts"
            f" ({e}); check AWS_ENDPOINT_URL and that the server is up")


def _client_sentence(store: S3Store, code: str, e) -> str:
    msg = e.response.get("Error", {}).get("Message") or str(e)
    if code == "NoSuchBucket":
        return f"bucket {store.bucket!r} does not exist at {_endpoint(store)} ({store.location}); create it first"
    if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
        return (f"{_endpoint(store)} refused access to {store.location} ({code}: {msg}); check AWS_ACCESS_KEY_ID,"
                f" AWS_SECRET_ACCESS_KEY or AWS_PROFILE")
    return f"{_endpoint(store)} answered {code} for {store.location}: {msg}"
