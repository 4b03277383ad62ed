"""runhost's HostConfig flags for the default tenant."""
import pytest

from ahp.management.commands.runhost import DEMO_TENANT, Command, apply_config_flags, create_demo_tenant
from grants.models import Tenant
from tools_app.models import HostConfig


def parsed(*argv):
    return vars(Command().create_parser("manage.py", "runhost").parse_args(argv))


def test_it_reads_the_flags():
    options = parsed("--advanced-tools", "--no-session-tools", "--session-tools-providers", "echo",
                     "--session-tools-providers", "copilot")
    assert (options["advanced_tools"], options["session_tools"]) == (True, False)
    assert options["session_tools_providers"] == ["echo", "copilot"]


@pytest.mark.django_db
def test_flags_set_the_default_tenants_config_and_leave_the_rest_alone():
    create_demo_tenant()
    config = HostConfig.for_tenant(Tenant.objects.get(slug=DEMO_TENANT))
    config.client_tool_timeout_ms = 1234
    config.save()
    changes = apply_config_flags(parsed("--advanced-tools", "--session-tools-providers", "echo"))
    assert changes == {"advancedTools": True, "sessionToolsProviders": ["echo"]}
    config.refresh_from_db()
    assert (config.advanced_tools, config.session_tools_providers, config.session_tools) == (True, ["echo"], True)
    assert config.client_tool_timeout_ms == 1234
    apply_config_flags(parsed("--no-session-tools"))
    config.refresh_from_db()
    assert (config.session_tools, config.advanced_tools) == (False, True)


@pytest.mark.django_db
def test_no_flags_change_nothing():
    create_demo_tenant()
    assert apply_config_flags(parsed()) == {}
