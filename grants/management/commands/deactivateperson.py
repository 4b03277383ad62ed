from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from grants.actions import do_deactivate_person


class Command(BaseCommand):
    help = "Deactivate a person: every token of theirs stops and their open sockets close."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, username, **options):
        person = get_user_model().objects.filter(username=username).first()
        if person is None:
            raise CommandError(f"No person {username}.")
        do_deactivate_person(person)
        self.stdout.write(f"Deactivated {username}")
