/**
 * The Android attestation root keys, as public keys (docs/token-format.md, android-key): Google's hardware
 * attestation roots are trusted by key, not by certificate, since one key outlives its
 * certificates. Source: https://developer.android.com/privacy-and-security/security-key-attestation#root_certificate
 * (certificates as published there and in android/keyattestation's roots), re-exported as SPKI.
 */

/**
 * Google's hardware attestation root key, RSA-4096. Four root certificates carry it: serials
 * e8fa196314d2fa18 (2016, expired 2026-05-24), d50ff25ba3f2d6b3 (2019), c36b7c44b9ae1831 (2021)
 * and f1c172a699eaf51d (2022), subject serialNumber=f92009e853b6b045. SPKI SHA-256
 * feb2ea7551ee316ed4bb443c8293b884dbfdea40b603ee3e4f4a897e4580fbae.
 */
export const GOOGLE_RSA_ROOT_KEY = `-----BEGIN PUBLIC KEY-----
MIICIjANBgkqhkiG9w0BAQEFAAOCAg8AMIICCgKCAgEAr7bHgiuxpwHsK7Qui8xU
FmOr75gvMsd/dTEDDJdSSxtf6An7xyqpRR90PL2abxM1dEqlXnf2tqw1Ne4Xwl5j
lRfdnJLmN0pTy/4lj4/7tv0Sk3iiKkypnEUtR6WfMgH0QZfKHM1+di+y9TFRtv6y
//0rb+T+W8a9nsNL/ggjnar86461qO0rOs2cXjp3kOG1FEJ5MVmFmBGtnrKpa73X
pXyTqRxB/M0n1n/W9nGqC4FSYa04T6N5RIZGBN2z2MT5IKGbFlbC8UrW0DxW7AYI
mQQcHtGl/m00QLVWutHQoVJYnFPlXTcHYvASLu+RhhsbDmxMgJJ0mcDpvsC4PjvB
+TxywElgS70vE0XmLD+OJtvsBslHZvPBKCOdT0MS+tgSOIfga+z1Z1g7+DVagf7q
uvmag8jfPioyKvxnK/EgsTUVi2ghzq8wm27ud/mIM7AY2qEORR8Go3TVB4HzWQgp
Zrt3i5MIlCaY504LzSRiigHCzAPlHws+W0rB5N+er5/2pJKnfBSDiCiFAVtCLOZ7
gLiMm0jhO2B6tUXHI/+MRPjy02i59lINMRRev56GKtcd9qO/0kUJWdZTdA2XoS82
ixPvZtXQpUpuL12ab+9EaDK8Z4RHJYYfCT3Q5vNAXaiWQ+8PTWm2QgBR/bkwSWc+
NpUFgNPN9PvQi8WEg5UmAGMCAwEAAQ==
-----END PUBLIC KEY-----
`;

/**
 * Google's "Key Attestation CA1" root key, ECDSA P-384 (certificate serial
 * 84a9d0297b0eb58ae7ff0e80de760605, 2025-07-17 to 2035-07-15): it signs remotely provisioned
 * chains since 2026. SPKI SHA-256 3ee44512a1af2beb39c889490c60ea3f82e43f5d5a5532f5ab9419f676cd07ec.
 */
export const GOOGLE_EC_ROOT_KEY = `-----BEGIN PUBLIC KEY-----
MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEI9ojcU7fPlsFCjxy6IRqzgeOoK0b+YsV
9FPQywiyw8EQRTkJ9u3qwfnI4DGoSLlBqClTXJfgfCcZvs60FikNMHnu4fkRzObf
gDkU2KNXezT9/RQ+XvNslxPHrHCowhGr
-----END PUBLIC KEY-----
`;

/**
 * The AOSP software attestation root keys (EC P-256, certificate serial a2059ed10e435b57; RSA-1024,
 * ff94d9dd9f07c80c). Their private keys are public in AOSP: never trusted, known only to name them
 * in explanations (an emulator, or Keystore's software implementation).
 */
export const AOSP_SOFTWARE_EC_ROOT_KEY = `-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE7l1ex+HA220Dpn7mthvsTWpdamgu
D/9/SQ59dx9EIm29sa/6FsvHrcV30lacqrewLVQBXT5DKyqO107sSHVBpA==
-----END PUBLIC KEY-----
`;

export const AOSP_SOFTWARE_RSA_ROOT_KEY = `-----BEGIN PUBLIC KEY-----
MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQCia63rbi5EYe/VDoLmt5TRdSMf
d5tjkWP/96r/C3JHTsAsQ+wzfNes7UA+jCigZtX3hwszl94OuE4TQKuvpSe/lWmg
MdsGUmX4RFlXYfC78hdLt0GAZMAoDo9Sd47b0ke2RekZyOmLw9vCkT/X11DEHTVm
+Vfkl5YLCazOkjWFmwIDAQAB
-----END PUBLIC KEY-----
`;
