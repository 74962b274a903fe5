CREATE TABLE "verification_stats" (
	"minute" timestamp with time zone NOT NULL,
	"api_key_id" text NOT NULL,
	"mode" text NOT NULL,
	"service" text NOT NULL,
	"app" text NOT NULL,
	"outcome" text NOT NULL,
	"reason" text NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "verification_stats_pk" PRIMARY KEY("minute","api_key_id","mode","service","app","outcome","reason")
);
