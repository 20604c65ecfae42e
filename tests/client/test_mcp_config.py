"""`memoryplatform-client mcp-config` against the live server: a key it accepts is printed; one it
refuses is an exit 1 that says so."""

from memoryplatform_client.cli import main as cli_main

from apikeys.models import ApiKey


def test_mcp_config_tries_the_key_on_a_server_that_answers(capsys, server_url, key_for):
    key = key_for(None, ApiKey.Role.VIEWER)
    assert cli_main(["mcp-config", "--url", server_url, "--key", key]) == 0
    printed = capsys.readouterr()
    assert "did not answer" not in printed.err and f"Bearer {key}" in printed.out

    unknown = key[:12] + "x" * (len(key) - 12)  # the shape of a key, not one the server made
    assert cli_main(["mcp-config", "--url", server_url, "--key", unknown]) == 1
    printed = capsys.readouterr()
    assert printed.out == "" and "refused the key (401)" in printed.err
