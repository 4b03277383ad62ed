import secrets

from django.core.management.base import BaseCommand, CommandError

from grants.actions import do_add_member, do_save_person
from kernel.refusals import Refused

from ._tenant import tenant_or_error


class Command(BaseCommand):
    help = ("Make a person (created if missing) a member of a tenant with a role; --admin-login lets them sign "
            "in to /admin/ (staff) and prints a new password for them.")

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("username")
        parser.add_argument("--role", required=True)
        parser.add_argument("--admin-login", action="store_true",
                            help="Let them sign in to the admin (staff) with a new password, printed once.")

    def handle(self, slug: str, username: str, role: str, admin_login: bool = False, **options: object) -> None:
        try:
            membership = do_add_member(tenant_or_error(slug), username, role)
        except Refused as refused:
            raise CommandError(refused.sentence) from None
        self.stdout.write(f"{membership.person.username} is {membership.role} in {slug}")
        if admin_login:
            person = membership.person
            password = secrets.token_urlsafe(12)
            person.is_staff = True
            person.set_password(password)
            do_save_person(person)
            self.stdout.write(f"{person.username} signs in at /admin/ with password {password}")
