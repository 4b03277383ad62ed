from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.http import Http404
from django.shortcuts import render

from grants.admin import administered_tenants
from tools_app.models import HostConfig

from .dashboard import dashboard


@staff_member_required
def tenants(request):
    """The dashboards this operator may open: their administered tenants."""
    context = {**admin.site.each_context(request), "title": "Operators' dashboards",
               "tenants": administered_tenants(request.user).order_by("slug")}
    return render(request, "console/tenants.html", context)


@staff_member_required
def tenant_dashboard(request, slug):
    # Another tenant's dashboard answers like one that does not exist.
    tenant = administered_tenants(request.user).filter(slug=slug).first()
    if tenant is None:
        raise Http404("No such tenant.")
    context = {**admin.site.each_context(request), "title": f"Dashboard: {tenant.name}", **dashboard(tenant),
               "config": HostConfig.for_tenant(tenant)}
    return render(request, "console/dashboard.html", context)
