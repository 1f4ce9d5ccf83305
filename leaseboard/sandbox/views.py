"""HTTP face of the payments sandbox: POST /sandbox/payments, GET /sandbox/payments (ledger)."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from leaseboard.sandbox.models import Payment
from leaseboard.sandbox.services import PaymentRequest, payment_attempt
from leaseboard_recipient import problem_for

MAX_BODY_BYTES = 16 * 1024


def _problem(status: int, code: str, detail: str) -> JsonResponse:
    body = {
        "type": f"urn:leaseboard:problem:{code}",
        "title": detail,
        "status": status,
        "code": code,
        "detail": detail,
    }
    return JsonResponse(body, status=status, content_type="application/problem+json")


def _parse(request: HttpRequest) -> PaymentRequest | str:
    if len(request.body) > MAX_BODY_BYTES:
        return f"the body is larger than {MAX_BODY_BYTES} bytes"
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return "the body is not JSON"
    if not isinstance(data, dict):
        return "the body must be a JSON object"
    amount, currency = data.get("amount_cents"), data.get("currency", "EUR")
    payee, key = data.get("payee", ""), data.get("idempotency_key", "")
    if not isinstance(amount, int) or isinstance(amount, bool) or not 0 < amount < 10**12:
        return "amount_cents must be a positive integer below 10^12"
    if not isinstance(currency, str) or len(currency) != 3 or not currency.isalpha():
        return "currency must be a three-letter code"
    if not isinstance(payee, str) or len(payee) > 200 or "\x00" in payee:
        return "payee must be a string of at most 200 characters"
    if not isinstance(key, str) or len(key) > 200 or "\x00" in key:
        return "idempotency_key must be a string of at most 200 characters"
    return PaymentRequest(
        amount_cents=amount, currency=currency.upper(), payee=payee, idempotency_key=key
    )


# deliberate: the payment named key by key, as the sandbox's JSON answers say it.
def _payment_json(payment: Payment) -> dict[str, Any]:
    return {
        "payment_id": payment.id,
        "status": payment.status,
        "work_key": payment.work_key,
        "epoch": payment.epoch,
        "high_water": payment.high_water,
        "amount_cents": payment.amount_cents,
        "currency": payment.currency,
        "payee": payment.payee,
        "refusal_code": payment.refusal_code,
    }


@csrf_exempt  # callers are agents presenting a fencing token, not browsers with cookies
@require_http_methods(["GET", "POST"])
def payments(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        rows = Payment.objects.order_by("-id")[:50]
        return JsonResponse({"payments": [_payment_json(p) for p in rows]})
    parsed = _parse(request)
    if isinstance(parsed, str):
        return _problem(400, "validation_error", parsed)
    attempt = payment_attempt(header=request.headers.get, request=parsed)
    if not attempt.decision.accepted:
        status, body = problem_for(attempt.decision)
        body["payment_id"] = attempt.payment.id
        return JsonResponse(body, status=status, content_type="application/problem+json")
    return JsonResponse(
        {**_payment_json(attempt.payment), "replayed": attempt.replayed},
        status=200 if attempt.replayed else 201,
    )
