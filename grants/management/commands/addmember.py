from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from grants.actions import do_add_member

from ._tenant import tenant_or_error


class Command(BaseCommand):
    help = "Make a person (created if missing) a member of a tenant with a role."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("username")
        parser.add_argument("--role", required=True)

    def handle(self, slug, username, role, **options):
        try:
            membership = do_add_member(tenant_or_error(slug), username, role)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(f"{membership.person.username} is {membership.role} in {slug}")
