"""Admin deletions through the owning app's `do_*`, for one row and for a selection alike."""
from typing import Generic, TypeVar

from django.db.models import Model, QuerySet
from django.http import HttpRequest

Row = TypeVar("Row", bound=Model)  # the model whose rows the admin deletes


class DeletesThroughActions(Generic[Row]):
    """Mixed into a ModelAdmin whose rows end through a `do_*` (`delete_row`): a bulk delete
    then cannot skip what that function tells (open sockets, caches)."""

    delete_related: tuple[str, ...] = ()  # select_related for a bulk delete, so delete_row's reads cost no query each

    def delete_row(self, obj: Row) -> None:
        raise NotImplementedError

    def delete_model(self, request: HttpRequest, obj: Row) -> None:
        self.delete_row(obj)

    def delete_queryset(self, request: HttpRequest, queryset: "QuerySet[Row]") -> None:
        for obj in queryset.select_related(*self.delete_related) if self.delete_related else queryset:
            self.delete_row(obj)
