"""Why a call to AWS (or an S3-compatible server) failed, in words a person can act on: the CLI's
messages and `replmon probe`'s preflight. botocore is imported only when there is an error to explain.

>>> explain(ValueError("versioning is off; replication needs it Enabled on both buckets"))
'versioning is off; replication needs it Enabled on both buckets'
"""

from __future__ import annotations


def explain(exc: Exception) -> str:
    """Why a call failed, in words a person can act on (the CLI's and preflight's messages)."""
    from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError, NoCredentialsError, ReadTimeoutError

    if isinstance(exc, ConnectTimeoutError | ReadTimeoutError):
        return "no answer within the timeout (is the endpoint reachable and the server alive?)"
    if isinstance(exc, EndpointConnectionError):
        return "cannot connect (is the server running and the URL right?)"
    if isinstance(exc, NoCredentialsError):
        return "no credentials: set REPLMON_ACCESS_KEY_ID and REPLMON_SECRET_ACCESS_KEY, or use an AWS profile"
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "AccessDenied", "InvalidClientTokenId",
                    "UnrecognizedClientException"):
            return f"credentials rejected ({code}): check the access key and secret for this endpoint"
        if code in ("404", "NoSuchBucket", "ResourceNotFoundException"):
            return f"not found ({code})"
        return code or str(exc)
    return str(exc).splitlines()[0]
