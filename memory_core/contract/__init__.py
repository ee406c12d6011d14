"""The HTTP contract: wire views, the route table and the OpenAPI document generated from them."""
