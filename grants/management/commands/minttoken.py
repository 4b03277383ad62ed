from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from grants.actions import do_mint_token
from kernel.refusals import Refused

from ._tenant import tenant_or_error


class Command(BaseCommand):
    help = "Mint a token for a person of a tenant, or the tenant's root token. Prints only the token."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("username", nargs="?")
        parser.add_argument("--root", action="store_true", help="A root token holding every grant in the tenant.")
        parser.add_argument("--name", help="A name to revoke it by later.")

    def handle(self, slug, username, root, name, **options):
        if root == bool(username):
            raise CommandError("Name a USERNAME or pass --root, not both.")
        tenant = tenant_or_error(slug)
        person = None
        if username:
            person = get_user_model().objects.filter(username=username).first()
            if person is None:
                raise CommandError(f"No person {username}.")
        try:
            _, plaintext = do_mint_token(tenant, person=person, name=name)
        except Refused as refused:
            raise CommandError(refused.sentence) from None
        self.stdout.write(plaintext)
