from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from grants.actions import do_remove_member
from kernel.refusals import Refused

from ._tenant import tenant_or_error


class Command(BaseCommand):
    help = "Remove a person from a tenant; their tokens there stop and their open sockets close."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("username")

    def handle(self, slug, username, **options):
        tenant = tenant_or_error(slug)
        person = get_user_model().objects.filter(username=username).first()
        if person is None:
            raise CommandError(f"No person {username}.")
        try:
            do_remove_member(tenant, person)
        except Refused as refused:
            raise CommandError(refused.sentence) from None
        self.stdout.write(f"{username} is no longer in {slug}")
