"""S3: uploads posted with a run, files blocks produce, and presigned download URLs."""

from __future__ import annotations

from typing import Any, cast

from botocore.exceptions import ClientError

from canvas_core.adapters.aws import LazyClient
from canvas_core.errors import StorageError
from canvas_core.settings import ServiceSettings, service_settings


class ArtifactStore:
    s3 = LazyClient("s3")

    def __init__(self, settings: ServiceSettings | None = None, s3: Any = None):
        self.settings = settings or service_settings()
        self.s3 = s3

    def put(self, key: str, data: bytes, content_type: str) -> None:
        try:
            self.s3.put_object(Bucket=self.settings.artifacts_bucket, Key=key, Body=data, ContentType=content_type)
        except ClientError as exc:
            raise StorageError(f"S3 put failed for {key}: {exc.response.get('Error', {}).get('Code')}") from exc

    def get(self, key: str) -> bytes:
        try:
            body = self.s3.get_object(Bucket=self.settings.artifacts_bucket, Key=key)["Body"]
            return cast(bytes, body.read())
        except ClientError as exc:
            raise StorageError(f"S3 get failed for {key}: {exc.response.get('Error', {}).get('Code')}") from exc

    def find(self, key: str) -> bytes | None:
        """The object's bytes, or None when there is none under `key`. S3 answers a read of a missing key with 403
        to a caller who may not list the bucket (a block: docs/isolation.md), so 403 reads as missing too."""
        try:
            body = self.s3.get_object(Bucket=self.settings.artifacts_bucket, Key=key)["Body"]
            return cast(bytes, body.read())
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404", "AccessDenied", "403"):
                return None
            raise StorageError(f"S3 get failed for {key}: {code}") from exc

    def download_url(self, key: str, file_name: str) -> str:
        """A presigned GET, minted on each call, that downloads the file under its readable name."""
        url = self.s3.generate_presigned_url(
            "get_object",
            Params={
                "Bucket": self.settings.artifacts_bucket,
                "Key": key,
                "ResponseContentDisposition": f'attachment; filename="{file_name}"',
            },
            ExpiresIn=self.settings.download_url_ttl_seconds,
        )
        return cast(str, url)
