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
