"""The HTTP API (FastAPI): routes, wire schemas, error bodies. ``create_app`` lives in
``bulkops.api.app`` (also exported as ``bulkops.create_app``)."""
