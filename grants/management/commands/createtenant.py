from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from grants.actions import do_create_tenant
from kernel.refusals import Refused


class Command(BaseCommand):
    help = "Create a tenant."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name")

    def handle(self, slug, name, **options):
        try:
            tenant = do_create_tenant(slug, name)
        except Refused as refused:
            raise CommandError(refused.sentence) from None
        except ValidationError as exc:  # the tenant model's own checks (its slug)
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(f"Created tenant {tenant.slug}")
