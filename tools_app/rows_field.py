"""An object-valued configuration key edited in the admin as rows of a small form, one row per
entry (mcpServers: one per server), each field validated where it is typed.

The field hands a bound formset from the widget to `clean`, which turns the rows back into the
key's wire value; the widget draws the same formset, errors and all, so a refused value is
marked on its own row and field."""
from django import forms
from django.core.exceptions import ValidationError
from django.forms.formsets import BaseFormSet

ROWS_INVALID = "Correct the rows marked below."


class RowsWidget(forms.Widget):
    template_name = "tools_app/rows_widget.html"  # app templates: the form renderer reads those

    def __init__(self, formset_class, to_rows, attrs=None):
        super().__init__(attrs)
        self.formset_class, self.to_rows = formset_class, to_rows

    def value_from_datadict(self, data, files, name):
        return self.formset_class(data, prefix=name)

    def get_context(self, name, value, attrs):
        context = super().get_context(name, value, attrs)
        formset = value if isinstance(value, BaseFormSet) else self.formset_class(initial=self.to_rows(value),
                                                                                  prefix=name)
        context["widget"]["formset"] = formset
        return context


class RowsField(forms.Field):
    def __init__(self, formset_class, to_rows, from_rows, **kwargs):
        """`to_rows(value)` gives the rows' initial data; `from_rows(cleaned rows)` the wire value."""
        super().__init__(required=False, widget=RowsWidget(formset_class, to_rows), **kwargs)
        self.from_rows = from_rows

    def clean(self, formset):
        if not isinstance(formset, BaseFormSet):
            return formset  # an initial value, not a submitted one
        if not formset.is_valid():
            raise ValidationError(ROWS_INVALID)
        return self.from_rows([form.cleaned_data for form in formset.forms
                               if form.has_changed() and not form.cleaned_data.get("DELETE")])

    def has_changed(self, initial, data):
        try:
            return self.clean(data) != initial
        except ValidationError:
            return True


class UniqueRows(BaseFormSet):
    """Rows keyed by one field (`key_field`): no two kept rows may share its value."""
    key_field = "name"

    def duplicate(self, value):
        return f"Another row is already named {value}."

    def clean(self):
        seen = set()
        for form in self.forms:
            value = form.cleaned_data.get(self.key_field) if form.has_changed() else None
            if value and not form.cleaned_data.get("DELETE"):
                if value in seen:
                    form.add_error(self.key_field, self.duplicate(value))
                seen.add(value)
