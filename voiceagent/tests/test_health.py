def test_healthz_answers_ok_when_the_database_answers(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}


def test_unknown_public_path_is_a_json_404(client, db):
    response = client.get("/public/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]
