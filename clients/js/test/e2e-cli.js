// The JS e2e module from the command line, for the Swift client's interop tests
// (Tests/VigilClientTests/E2ETests.swift): what one client seals the other opens.
//   node e2e-cli.js seal   KEY KID SEQ STATUS POSITION_JSON   → the sealed value
//   node e2e-cli.js open   KEY KID SEQ STATUS SEALED          → the position's JSON, or "error CODE" (exit 2)
//   node e2e-cli.js wrap   MEMBER_SECRET KID MEMBER KEY       → the box
//   node e2e-cli.js unwrap MEMBER_SECRET KID MEMBER BOX       → the key's base64url, or "error CODE" (exit 2)
// Keys and member secrets are base64url.
import { seal, open, wrapForMember, unwrapForMember, decodeKey, encodeKey, base64urlDecode, E2EError } from '../src/e2e.js';

const [command, a, kid, n, b, c] = process.argv.slice(2);
try {
  switch (command) {
    case 'seal': console.log(await seal(decodeKey(a), kid, Number(n), b, JSON.parse(c))); break;
    case 'open': console.log(JSON.stringify(await open(decodeKey(a), kid, Number(n), b, c))); break;
    case 'wrap': console.log(await wrapForMember(base64urlDecode(a), kid, Number(n), decodeKey(b))); break;
    case 'unwrap': console.log(encodeKey(await unwrapForMember(base64urlDecode(a), kid, Number(n), b))); break;
    default: console.error(`unknown command ${command}`); process.exit(64);
  }
} catch (e) {
  if (e instanceof E2EError) { console.log(`error ${e.code}`); process.exit(2); }
  throw e;
}
