"""Reading a create's file from where it already lives (``sourceUrl``): S3 objects through
the service's S3 settings, and allow-listed http(s) URLs guarded against server-side
request forgery."""

from __future__ import annotations
