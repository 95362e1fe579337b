# Schemathesis's hooks for tests/schemathesis.rs: how a body of `POST /v1/archives/_bulk` (NDJSON, which Schemathesis does not know) is sent.
import schemathesis


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    """The generated text as it is (the document describes the body as text); a value that is not text has no NDJSON form, and is sent as no body."""
    if not isinstance(value, str):
        return None
    return value.encode("utf-8")
