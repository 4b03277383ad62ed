from django.core.management.base import BaseCommand, CommandError

from grants.actions import do_revoke_token
from kernel.refusals import Refused

from ._tenant import tenant_or_error


class Command(BaseCommand):
    help = "Revoke a tenant's token by name."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("name")

    def handle(self, slug, name, **options):
        try:
            do_revoke_token(tenant_or_error(slug), name)
        except Refused as refused:
            raise CommandError(refused.sentence) from None
        self.stdout.write(f"Revoked {name}")
