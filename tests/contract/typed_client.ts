// A TypeScript consumer of the API, as docs/contract.md shows one: types
// generated from openapi.yaml by openapi-typescript (plant-store-api.d.ts,
// made beside this file), calls made with openapi-fetch, compiled with
// `tsc --strict`. Against a running API (BASE_URL, as TOKEN's owner, who
// must have no plants yet): create plants, list them, follow the Link
// header's next page to the end, and read a typed Error.
import createClient from "openapi-fetch";
import type { components, paths } from "./plant-store-api";

type Plant = components["schemas"]["Plant"];
type ApiError = components["schemas"]["Error"];
type GatewayError = components["schemas"]["GatewayError"];

/// The function's Error body, told apart from API Gateway's own answers
/// (`{"message"}`), which a client meets too and retries.
function isApiError(body: ApiError | GatewayError | undefined): body is ApiError {
  return body !== undefined && "error" in body;
}

const baseUrl = process.env.BASE_URL ?? "http://127.0.0.1:9000";
const client = createClient<paths>({
  baseUrl,
  headers: { Authorization: `Bearer ${process.env.TOKEN}` },
});

function check(condition: boolean, what: string): void {
  if (!condition) {
    throw new Error(`typed client: ${what}`);
  }
}

/// The `cursor` of a `Link: <...>; rel="next"` header, if any.
function nextCursor(link: string | null): string | undefined {
  const target = link?.match(/^<([^>]+)>; rel="next"$/)?.[1];
  return target ? new URL(target, baseUrl).searchParams.get("cursor") ?? undefined : undefined;
}

async function main(): Promise<void> {
  const plants: Plant[] = [
    { name: "Fern" },
    { name: "Aloe", tag: "succulent" },
    { name: "Monstera", tag: "tropical" },
  ];
  for (const [index, plant] of plants.entries()) {
    const { data, response } = await client.POST("/plants", {
      body: { id: index + 1, ...plant },
    });
    check(response.status === 200 && data?.name === plant.name, `create ${plant.name}`);
  }

  const listed: Plant[] = [];
  let cursor: string | undefined;
  do {
    const { data, response } = await client.GET("/plants", {
      params: { query: { limit: 2, cursor } },
    });
    check(response.status === 200 && data !== undefined, "list a page");
    listed.push(...(data ?? []));
    cursor = nextCursor(response.headers.get("link"));
  } while (cursor !== undefined);
  check(JSON.stringify(listed) === JSON.stringify(plants), `listed ${JSON.stringify(listed)}`);

  const { error, response } = await client.POST("/plants", {
    body: { id: 1, name: "Ivy" },
  });
  check(response.status === 409 && isApiError(error), "a conflict is the Error body");
  const conflict = error as ApiError;
  check(conflict.error === 409, `the Error's status: ${conflict.error}`);
  check(conflict.message.includes("id 1"), `the Error names the id: ${conflict.message}`);
  console.log(`typed client: created ${plants.length} plants, listed them in pages of 2, read a typed 409`);
}

main().catch((failure: unknown) => {
  console.error(failure);
  process.exit(1);
});
