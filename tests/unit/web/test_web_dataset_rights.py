"""The dashboard records a dataset's licence: a field of the upload form, and a form on the dataset's page."""

from __future__ import annotations

from tests.fixtures.app import API, AppHarness, sign_in


def test_the_upload_form_asks_for_the_licence_and_the_list_shows_it(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["alice"])
    web.store.datasets.create_dataset(web.users["alice"], "unlicensed")
    page = web.client.get("/datasets").text
    assert 'id="upload-licence" name="licence"' in page and 'id="upload-rights-note" name="rights_note"' in page
    assert "<td>not recorded</td>" in page


def test_the_dataset_page_saves_the_rights_and_refuses_bad_text_saying_why(web: AppHarness) -> None:
    dataset = web.store.datasets.create_dataset(web.users["alice"], "faq")
    csrf = sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/datasets/{dataset.id}").text
    assert '<p id="dataset-licence"><strong>Licence:</strong> not recorded' in page and 'id="rights-form"' in page

    refused = web.client.post(
        f"/datasets/{dataset.id}/rights", data={"csrf_token": csrf, "licence": "cc\x07by", "rights_note": "Ours."}
    )
    assert refused.status_code == 422
    assert "licence: expected one line of text without control characters, found the character U+0007" in refused.text
    assert ">Ours.</textarea>" in refused.text  # what was sent stays in the form
    assert web.client.get(f"{API}/datasets/{dataset.id}", headers=web.auth("alice")).json()["licence"] is None

    saved = web.client.post(
        f"/datasets/{dataset.id}/rights",
        data={"csrf_token": csrf, "licence": "cc-by-4.0", "rights_note": "From our help pages.\r\nReviewed."},
        follow_redirects=False,
    )
    assert saved.status_code == 303 and saved.headers["location"] == f"/datasets/{dataset.id}?rights=saved"
    after = web.client.get(saved.headers["location"]).text
    assert "Licence:</strong> cc-by-4.0" in after and "licence and rights note were saved" in after
    stored = web.client.get(f"{API}/datasets/{dataset.id}", headers=web.auth("alice")).json()
    assert (stored["licence"], stored["rights_note"]) == ("cc-by-4.0", "From our help pages.\nReviewed.")

    cleared = web.client.post(f"/datasets/{dataset.id}/rights", data={"csrf_token": csrf, "licence": ""})
    assert cleared.status_code == 200  # followed the redirect
    assert web.client.get(f"{API}/datasets/{dataset.id}", headers=web.auth("alice")).json()["licence"] is None
    assert web.client.post(f"/datasets/{dataset.id}/rights", data={"licence": "mit"}).status_code == 403  # no CSRF
    bob_csrf = sign_in(web.client, web.tokens["bob"])
    other = web.client.post(f"/datasets/{dataset.id}/rights", data={"csrf_token": bob_csrf, "licence": "mit"})
    assert other.status_code == 404
