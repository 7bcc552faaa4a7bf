"""Makes srp-vector.json: a Cognito USER_SRP_AUTH exchange computed by pycognito (the library PyEmVue signs in with),
so the gateway's own SRP-6a code is checked against an independent implementation.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install pycognito==2024.5.1
    /tmp/v/bin/python make-srp-vector.py > srp-vector.json

The server's half (salt, verifier, B) is computed here from the SRP-6a definitions; the client's half (A, the
password claim signature) is pycognito's, with its random `a` and clock fixed.
"""
import datetime, hashlib, json
import pycognito.aws_srp as srp

POOL = "us-east-2_ghlOXVLi1"
CLIENT = "4qte47jbstod8apnfic0bunmrq"
USERNAME = "someone@example.com"
USER_ID_FOR_SRP = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
PASSWORD = "correct horse battery staple"
SALT = "a3f1c0ffee5eed0123456789abcdef01"
SMALL_A = int("6d3c1e2a9b8f7a6e5d4c3b2a19f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6", 16)
SMALL_B = int("1f2e3d4c5b6a79881726354453627180f9e8d7c6b5a4938271605f4e3d2c1b0a", 16)
SECRET_BLOCK = "c2VjcmV0IGJsb2NrIGZyb20gdGhlIHNlcnZlcg=="
WHEN = datetime.datetime(2026, 3, 5, 7, 8, 9)

N = srp.hex_to_long(srp.N_HEX)
g = srp.hex_to_long(srp.G_HEX)
k = srp.hex_to_long(srp.hex_hash("00" + srp.N_HEX + "0" + srp.G_HEX))
inner = srp.hash_sha256((POOL.split("_")[1] + USER_ID_FOR_SRP + ":" + PASSWORD).encode())
x = srp.hex_to_long(srp.hex_hash(srp.pad_hex(SALT) + inner))
verifier = pow(g, x, N)
B = (k * verifier + pow(g, SMALL_B, N)) % N

client = srp.AWSSRP(username=USERNAME, password=PASSWORD, pool_id=POOL, client_id=CLIENT, client=object())
client.small_a_value = SMALL_A
client.large_a_value = client.calculate_a()


class FixedClock(datetime.datetime):
    @classmethod
    def utcnow(cls):
        return WHEN


srp.datetime.datetime = FixedClock
params = client.get_auth_params()
answer = client.process_challenge(
    {"USER_ID_FOR_SRP": USER_ID_FOR_SRP, "SALT": SALT, "SRP_B": srp.long_to_hex(B), "SECRET_BLOCK": SECRET_BLOCK, "USERNAME": USER_ID_FOR_SRP},
    {"USERNAME": USERNAME},
)
print(json.dumps({
    "made_by": "pycognito 2024.5.1 aws_srp.AWSSRP (make-srp-vector.py)",
    "pool_id": POOL, "username": USERNAME, "password": PASSWORD, "user_id_for_srp": USER_ID_FOR_SRP,
    "salt": SALT, "small_a": format(SMALL_A, "x"), "small_b": format(SMALL_B, "x"), "verifier": format(verifier, "x"),
    "srp_a": params["SRP_A"], "srp_b": srp.long_to_hex(B), "secret_block": SECRET_BLOCK,
    "timestamp": answer["TIMESTAMP"], "signature": answer["PASSWORD_CLAIM_SIGNATURE"],
}, indent=1))
