"""Provider adapters. Each subpackage binds the core ports to one platform; cloud SDKs are
imported only when an adapter is used, never by ``import cronwarden``."""
