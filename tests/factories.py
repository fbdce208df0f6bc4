"""factory_boy factories for app tests."""

from __future__ import annotations

import factory
from django.contrib.auth.models import User

from scheduling.models import AcceleratorType, Node, Pod, Rack
from tenants.models import Department, Membership, Team

PASSWORD = "fleetline-test"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password(PASSWORD)


class DepartmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Department
        django_get_or_create = ("name",)

    name = "Research"


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    department = factory.SubFactory(DepartmentFactory)
    name = factory.Sequence(lambda n: f"Team {n}")
    slug = factory.Sequence(lambda n: f"team-{n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    role = Membership.Role.MEMBER


class AcceleratorTypeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AcceleratorType
        django_get_or_create = ("name",)

    name = "H100"


class PodFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Pod

    name = factory.Sequence(lambda n: f"pod-{n}")


class RackFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Rack

    pod = factory.SubFactory(PodFactory)
    name = factory.Sequence(lambda n: f"rack-{n}")


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node

    rack = factory.SubFactory(RackFactory)
    name = factory.Sequence(lambda n: f"node-{n:04d}")
    accelerator_type = factory.SubFactory(AcceleratorTypeFactory)
    gpus = 8
    healthy_gpus = 8


# Tenants: quotas, requests and policy ------------------------------------------------------------

from tenants.models import FleetPolicy, PriorityClass, Quota, QuotaRequest  # noqa: E402


class QuotaFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Quota

    team = factory.SubFactory(TeamFactory)
    accelerator_type = factory.SubFactory(AcceleratorTypeFactory)
    guaranteed = 8
    borrow_limit = None
    lend_limit = None


class QuotaRequestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QuotaRequest

    team = factory.SubFactory(TeamFactory)
    accelerator_type = factory.SubFactory(AcceleratorTypeFactory)
    guaranteed = 16
    borrow_limit = 8
    lend_limit = None
    justification = "Pre-training run for the next model generation."
    requested_by = factory.SubFactory(UserFactory)


class PriorityClassFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PriorityClass
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"class-{n}")
    value = 300
    kind = PriorityClass.Kind.TRAINING
    preemptible = True
    may_preempt = True


class FleetPolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = FleetPolicy
        django_get_or_create = ("id",)

    id = FleetPolicy.SINGLETON_ID
