"""The service's API keys over HTTP, for admin keys: list them by id, revoke one (``serve.security.key_admin``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from serve.security import key_admin
from serve import service as svc
from serve.routes.tasks import tenant

router = APIRouter(tags=["keys"])


@router.get("/v1/admin/keys", summary="Admin keys only: the service's keys by id, whether each is an admin's and "
            "revoked")
def list_keys(request: Request) -> dict[str, Any]:
    return {"keys": key_admin.listing(svc.current(), tenant(request))}


@router.post("/v1/admin/keys/{key_id}/revoke", summary="Admin keys only: revoke the key that has this id; every "
             "replica refuses it within 5 s, without a restart")
def revoke_key(key_id: str, request: Request) -> dict[str, Any]:
    return key_admin.revoke_id(svc.current(), key_id, tenant(request))
