from django.core.management.base import CommandError

from grants.models import Tenant


def tenant_or_error(slug):
    try:
        return Tenant.objects.get(slug=slug)
    except Tenant.DoesNotExist:
        raise CommandError(f"No tenant {slug}.") from None
