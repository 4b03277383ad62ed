"""Tenant secrets at rest: sealed with AHP_SECRETS_KEY (Fernet), opened only with it; rows
written before sealing are sealed by the migration; a tenant cannot pass off ciphertext."""
from importlib import import_module

import pytest
from cryptography.fernet import Fernet
from django.apps import apps

from sandbox.sealing import UNREADABLE, SecretUnreadable, seal, unseal
from tools_app.actions import do_change_host_config
from tools_app.families.mcp_servers.servers import revealed
from tools_app.models import HostConfig


def test_a_sealed_value_opens_only_with_the_key_that_sealed_it(settings):
    settings.AHP_SECRETS_KEY = Fernet.generate_key().decode()
    sealed = seal("hunter2")
    assert "hunter2" not in sealed and unseal(sealed) == "hunter2"
    old = settings.AHP_SECRETS_KEY
    settings.AHP_SECRETS_KEY = Fernet.generate_key().decode()
    with pytest.raises(SecretUnreadable) as unreadable:
        unseal(sealed)
    assert str(unreadable.value) == UNREADABLE
    settings.AHP_SECRETS_KEY = f"{settings.AHP_SECRETS_KEY},{old}"  # rotation: the new key first, the old still opens
    assert unseal(sealed) == "hunter2"


def test_a_tenant_sending_another_tenants_ciphertext_gets_it_back_as_text(acme, globex):
    do_change_host_config(acme.principal("root"), {"mcpServers": {"web": {
        "type": "http", "url": "https://mcp.example/", "headers": {"Authorization": "acme-secret"}}}})
    stolen = HostConfig.for_tenant(acme.tenant).mcp_servers["web"]["headers"]["Authorization"]
    do_change_host_config(globex.principal("root"), {"mcpServers": {"web": {
        "type": "http", "url": "https://mcp.example/", "headers": {"Authorization": stolen}}}})
    assert revealed(HostConfig.for_tenant(globex.tenant).mcp_servers["web"])["headers"] == {"Authorization": stolen}


def test_the_migration_seals_rows_stored_in_plaintext(acme):
    legacy = {"git": {"type": "stdio", "command": "g", "env": {"GIT_TOKEN": "plain-s3cret"}}}
    HostConfig.objects.filter(pk=HostConfig.for_tenant(acme.tenant).pk).update(mcp_servers=legacy)
    import_module("tools_app.migrations.0004_outbound_seal_mcp_secrets").seal_stored(apps, None)
    stored = HostConfig.objects.values_list("mcp_servers", flat=True).get(tenant=acme.tenant)
    assert "plain-s3cret" not in str(stored) and revealed(stored["git"]) == legacy["git"]
