"""The calls an article API makes, through the Python client openapi-python-client makes from
the service's description (scripts/client-check generates it and runs this against a live
`neardup serve`). Usage: client_check.py URL INDEX ARTICLE_JSON LEAD_JSON (an article the index
lacks, and a lead excerpt of it)."""

import io
import json
import sys
from http import HTTPStatus

from neardup_client import Client
from neardup_client.api.articles import bulk_articles, put_article
from neardup_client.api.fingerprint import fingerprint
from neardup_client.api.service import health
from neardup_client.api.similar import similar_by_article, similar_by_id
from neardup_client.models import (
    Article,
    BulkArticle,
    BulkArticles,
    BulkResult,
    ErrorCode,
    ErrorResponse,
    FingerprintRecord,
    Found,
    FoundMethod,
    FoundQuery,
    HealthStatus,
    Relation,
    Stored,
    StoredResult,
)
from neardup_client.types import File

checks = 0


def check(ok, what):
    global checks
    if not ok:
        raise AssertionError(f"python client: {what}")
    checks += 1


def ids(matches):
    return {m.id for m in matches}


def main():
    url, index, given, lead = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
    new_id = given["id"]
    client = Client(base_url=url, raise_on_unexpected_status=True)

    h = health.sync(client=client)
    check(h is not None and h.status == HealthStatus.OK, f"health: {h}")

    # Dedupe on ingest: a new article is stored (201) ...
    article = Article(title=given["title"], content=given["content"])
    article.additional_properties["published_at"] = "2026-11-23T08:00:00Z"
    r = put_article.sync_detailed(index, new_id, client=client, body=article, dedupe=True)
    check(r.status_code == HTTPStatus.CREATED, f"PUT ?dedupe=true of a new article: {r.status_code} {r.content!r}")
    check(isinstance(r.parsed, Stored) and r.parsed.result == StoredResult.CREATED and r.parsed.index == index,
          f"PUT answer: {r.parsed}")

    # ... and a near copy of it is not: 409 `duplicate`, with the stored article among the matches.
    repost = Article(title=given["title"], content=["来源：青禾日报", given["content"], "（责任编辑：张三）"])
    r = put_article.sync_detailed(index, new_id + "-repost", client=client, body=repost, dedupe=True)
    check(r.status_code == HTTPStatus.CONFLICT, f"PUT ?dedupe=true of a near copy: {r.status_code} {r.content!r}")
    check(isinstance(r.parsed, ErrorResponse) and r.parsed.error.code == ErrorCode.DUPLICATE, f"409: {r.parsed}")
    check(new_id in ids(r.parsed.matches), f"409 matches lack {new_id}: {r.parsed.matches}")
    check(r.parsed.relation == Relation.NEAR_DUPLICATE, f"409 relation: {r.parsed}")

    # Near-duplicates of a stored article, by id.
    found = similar_by_id.sync(index, "ex-003", client=client)
    check(isinstance(found, Found) and "ex-003-repost" in ids(found.matches), f"similar by id: {found}")
    check(found.query == FoundQuery.STORED and found.method == FoundMethod.MINHASH, f"similar by id: {found}")

    # Near-duplicates of an article, by its text (its stored copy among them).
    found = similar_by_article.sync(index, client=client, body=article, threshold=0.5)
    check(isinstance(found, Found) and new_id in ids(found.matches) and found.query == FoundQuery.COMPUTED,
          f"similar by article: {found}")
    check(found.threshold == 0.5, f"similar by article, threshold: {found}")

    # The refused near copy was not stored: 404 `not_found`.
    r = similar_by_id.sync_detailed(index, new_id + "-repost", client=client)
    check(r.status_code == HTTPStatus.NOT_FOUND and isinstance(r.parsed, ErrorResponse), f"404: {r.status_code}")
    check(r.parsed.error.code == ErrorCode.NOT_FOUND, f"404 code: {r.parsed}")

    # Fingerprints: `u64` is the SimHash as an unsigned 64-bit integer.
    fp = fingerprint.sync(client=client, body=article)
    check(isinstance(fp, FingerprintRecord) and isinstance(fp.minhash, list) and len(fp.minhash) == 128,
          f"fingerprint: {fp}")
    check(fp.u64 == int(fp.simhash, 16), f"fingerprint u64: {fp}")

    # Many articles in one request, as JSON (`{"articles": [...]}`): a near copy is refused
    # on its own (409 naming the stored article), ...
    copy = BulkArticle(id=new_id + "-bulk", title=given["title"], content=repost.content)
    r = bulk_articles.sync_detailed(index, client=client, body=BulkArticles(articles=[copy]), dedupe=True)
    check(r.status_code == HTTPStatus.OK and isinstance(r.parsed, BulkResult), f"bulk (JSON): {r.status_code} {r.content!r}")
    item = r.parsed.items[0]
    check(r.parsed.errors and item.status == 409 and item.id == new_id + "-bulk", f"bulk (JSON) item: {item}")
    check(item.error.code == ErrorCode.DUPLICATE and new_id in ids(item.matches), f"bulk (JSON) 409: {item}")
    # ... and as JSON Lines (bytes) without dedupe it is written: 201.
    line = json.dumps({"id": new_id + "-bulk", "title": given["title"], "content": given["content"]}, ensure_ascii=False)
    lines = File(payload=io.BytesIO((line + "\n").encode()))
    r = bulk_articles.sync_detailed(index, client=client, body=lines)
    check(r.status_code == HTTPStatus.OK and not r.parsed.errors and r.parsed.items[0].status == 201,
          f"bulk (JSON Lines): {r.status_code} {r.content!r}")

    # Relations: a stored lead excerpt of the article is a match the article `contains` (at a
    # threshold above their similarity), and is none with `containment=false`.
    excerpt = Article(title=lead["title"], content=lead["content"])
    r = put_article.sync_detailed(index, new_id + "-lead", client=client, body=excerpt)
    check(r.status_code == HTTPStatus.CREATED, f"PUT of the lead: {r.status_code} {r.content!r}")
    found = similar_by_id.sync(index, new_id, client=client, threshold=0.9)
    lead_match = [m for m in found.matches if m.id == new_id + "-lead"]
    check(len(lead_match) == 1 and lead_match[0].relation == Relation.CONTAINS and lead_match[0].containment >= 0.7,
          f"similar by id, the lead contained: {found}")
    found = similar_by_id.sync(index, new_id, client=client, threshold=0.9, containment=False)
    check(new_id + "-lead" not in ids(found.matches), f"similar by id, containment=false: {found}")

    print(f"python: {checks} passed, 0 failed")


if __name__ == "__main__":
    main()
