"""How alike the embedded keyword index and Azure AI Search analyse text (skipped unless a service is set).

Sends sample Japanese and English sentences to a fresh index's Analyze API with the analyzer of the
``memory`` field (:data:`memory_core.adapters.azure.search_index.ANALYZER`) and compares the tokens with
:func:`memory_core.language.text.index_terms`. The overlap per sentence (shared tokens over all tokens, after
NFKC and lower-casing) is printed; the test fails only when the two share nothing at all, which would
mean one side does not analyse the language. Set ``AZURE_SEARCH_ENDPOINT`` as for the live store
contract (``tests/azure/test_live_store_contract.py``).
"""

from __future__ import annotations

import asyncio
import os
import unicodedata
import uuid

import pytest

from memory_core.config import Settings
from memory_core.language.text import index_terms

pytestmark = [
    pytest.mark.azure,
    pytest.mark.skipif(
        not os.environ.get("AZURE_SEARCH_ENDPOINT"),
        reason="AZURE_SEARCH_ENDPOINT is not set (live Azure test)",
    ),
]

SENTENCES = [
    "大阪旅行では駅近のホテルを最優先したいです。",
    "最近胃腸が弱くなったので、今は辛い料理が苦手です。",
    "京都の旅館に泊まりたいと思っています。",
    "シュミレーションとシミュレーションの違いは何ですか？",
    "ＰＹＴＨＯＮとPythonでデータ分析をしています。",
    "I went to a support group yesterday and it was so powerful.",
    "My favorite fantasy novels are the Earthsea books.",
    "Actually, I now prefer window seats on flights, not aisle seats.",
]


def overlap(ours: list[str], theirs: list[str]) -> float:
    a = {unicodedata.normalize("NFKC", t).lower() for t in ours}
    b = {unicodedata.normalize("NFKC", t).lower() for t in theirs}
    return len(a & b) / len(a | b) if a | b else 1.0


def test_embedded_and_azure_analysis_overlap() -> None:
    from azure.search.documents.indexes.aio import SearchIndexClient
    from azure.search.documents.indexes.models import AnalyzeTextOptions

    from memory_core.adapters.azure.search_index import (
        ANALYZER,
        build_index,
        close_credential,
        default_credential,
        ensure_index_definition,
    )

    settings = Settings.from_env(os.environ, store="azure_search", embedder="hash")

    async def scenario() -> list[tuple[str, float, list[str], list[str]]]:
        credential = default_credential(api_key=settings.azure_search_api_key, client_id=settings.azure_client_id)
        name = f"{settings.azure_search_index_name}-t{uuid.uuid4().hex[:10]}"
        client = SearchIndexClient(settings.azure_search_endpoint, credential)
        rows = []
        try:
            await ensure_index_definition(client, build_index(name, 8))
            for sentence in SENTENCES:
                result = await client.analyze_text(name, AnalyzeTextOptions(text=sentence, analyzer_name=ANALYZER))
                theirs = [t.token for t in result.tokens]
                ours = index_terms(sentence)
                rows.append((sentence, overlap(ours, theirs), ours, theirs))
        finally:
            await client.delete_index(name)
            await client.close()
            await close_credential(credential)
        return rows

    rows = asyncio.run(scenario())
    for sentence, share, ours, theirs in rows:
        print(f"{share:.2f}  {sentence}\n      embedded: {ours}\n      {ANALYZER}: {theirs}")
    print(f"mean overlap {sum(r[1] for r in rows) / len(rows):.2f} over {len(rows)} sentences")
    assert all(share > 0 for _, share, _, _ in rows)
