"""Loopback fakes of outside services that speak their real wire protocols."""
